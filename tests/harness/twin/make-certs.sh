#!/usr/bin/env bash
# make-certs.sh DIR [AGENT...]: a CA and ED25519 certificates for
# ank-server (SAN ank-server, localhost, 127.0.0.1), ank-agent (SANs the
# agent names) and ank in DIR, made as Ankaios' mTLS guide makes them;
# keys 0600.
set -euo pipefail
dir=$1
shift
agents=("$@")
[ ${#agents[@]} -gt 0 ] || agents=(ank-agent)
mkdir -p "$dir"
cd "$dir"
printf '[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = ankaios-ca\n' >ca.cnf
openssl genpkey -algorithm ED25519 -out ca-key.pem 2>/dev/null
openssl req -config ca.cnf -new -x509 -key ca-key.pem -out ca.pem 2>/dev/null
for who in ank-server:serverAuth ank-agent:clientAuth ank:clientAuth; do
    name=${who%%:*} usage=${who##*:}
    sans="DNS.1 = $name"
    if [ "$name" = ank-agent ]; then
        sans=""
        for i in "${!agents[@]}"; do sans+="DNS.$((i + 1)) = ${agents[$i]}"$'\n'; done
    elif [ "$name" = ank-server ]; then
        sans+=$'\nDNS.2 = localhost\nIP.1 = 127.0.0.1'
    fi
    printf '[req]\ndistinguished_name = dn\nreq_extensions = v3_req\nprompt = no\n[dn]\nCN = %s\n[v3_req]\nsubjectAltName = @alt\nextendedKeyUsage = %s\n[alt]\n%s\n' \
        "$name" "$usage" "$sans" >"$name.cnf"
    openssl genpkey -algorithm ED25519 -out "$name-key.pem" 2>/dev/null
    openssl req -config "$name.cnf" -new -key "$name-key.pem" -out "$name.csr" 2>/dev/null
    openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -extensions v3_req \
        -extfile "$name.cnf" -out "$name.pem" 2>/dev/null
done
chmod 0600 ./*.pem
