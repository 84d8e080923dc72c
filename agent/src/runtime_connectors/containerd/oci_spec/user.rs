//! The user a container's process runs as: `-u` or the image's `User`
//! (`uid`, `uid:gid`, `name`, `name:group`, any mix), resolved against the
//! image's own `/etc/passwd` and `/etc/group` as docker does.
//!
//! A user's group is the `gid` of its passwd entry (0 when a numeric uid
//! has none); its supplementary groups are the groups of `/etc/group` that
//! list its name, unless the group was given explicitly.

use super::SpecError;
use super::model::User;

/// A file of the image's root file system, by absolute path.
pub type RootfsFiles<'a> = &'a dyn Fn(&str) -> Option<Vec<u8>>;

/// One passwd or group entry: name, id, and (groups) member names.
struct Entry {
    name: String,
    id: u32,
    members: Vec<String>,
}

/// The entries of a passwd (`name:x:uid:gid:…`, id field 2, group field 3)
/// or group (`name:x:gid:members`) file; malformed lines are skipped.
fn entries(text: &str, passwd: bool) -> Vec<(Entry, Option<u32>)> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let id = fields.get(2)?.parse().ok()?;
            let (gid, members) = if passwd {
                (Some(fields.get(3)?.parse().ok()?), Vec::new())
            } else {
                let members = fields
                    .get(3)
                    .map_or(Vec::new(), |m| m.split(',').filter(|m| !m.is_empty()).map(str::to_owned).collect());
                (None, members)
            };
            Some((Entry { name: fields.first()?.to_string(), id, members }, gid))
        })
        .collect()
}

fn read(files: RootfsFiles<'_>, path: &str) -> Option<String> {
    files(path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

/// Resolves `spec` (empty: root) to the process user.
pub fn resolve(spec: &str, files: RootfsFiles<'_>) -> Result<User, SpecError> {
    let spec = spec.trim();
    if spec.is_empty() {
        return resolve("0", files);
    }
    let (user, group) = spec.split_once(':').map_or((spec, None), |(u, g)| (u, Some(g)));
    let passwd = read(files, "/etc/passwd").map(|t| entries(&t, true)).unwrap_or_default();
    let by_user = |e: &&(Entry, Option<u32>)| match user.parse::<u32>() {
        Ok(uid) => e.0.id == uid,
        Err(_) => e.0.name == user,
    };
    let found = passwd.iter().find(by_user);
    let (uid, name, primary) = match (user.parse::<u32>(), found) {
        (_, Some((entry, gid))) => (entry.id, Some(entry.name.clone()), gid.unwrap_or(0)),
        (Ok(uid), None) => (uid, None, 0),
        (Err(_), None) => return Err(SpecError::UnknownUser { user: user.to_owned() }),
    };
    let groups = read(files, "/etc/group").map(|t| entries(&t, false)).unwrap_or_default();
    let Some(group) = group else {
        let additional_gids = name
            .map(|name| {
                let mut gids: Vec<u32> = Vec::new();
                for (g, _) in groups.iter().filter(|(g, _)| g.id != primary && g.members.contains(&name)) {
                    if !gids.contains(&g.id) {
                        gids.push(g.id);
                    }
                }
                gids
            })
            .unwrap_or_default();
        return Ok(User { uid, gid: primary, additional_gids });
    };
    let gid = match group.parse::<u32>() {
        Ok(gid) => gid,
        Err(_) => groups
            .iter()
            .find(|(g, _)| g.name == group)
            .map(|(g, _)| g.id)
            .ok_or_else(|| SpecError::UnknownGroup { group: group.to_owned() })?,
    };
    Ok(User { uid, gid, additional_gids: Vec::new() })
}
