# Runs sdk_conformance.py with the official Ankaios Python SDK (ankaios-sdk
# from PyPI, unchanged) outside any container: the SDK's fixed control
# interface folder (ControlInterface.ANKAIOS_CONTROL_INTERFACE_BASE_PATH,
# normally /run/ankaios/control_interface) is pointed at FIFO_DIR, the
# folder our agent made for the workload. Every warning the SDK logs is
# collected; any fails the run after the script's own steps.
# Prints "NO SDK WARNINGS" and exits 0 only if the script printed ALL OK.
# Usage: python3 sdk_fifo_harness.py FIFO_DIR AGENT_NAME

import logging
import os
import runpy
import sys

from ankaios_sdk._components.control_interface import ControlInterface

FIFO_DIR, AGENT = sys.argv[1], sys.argv[2]
ControlInterface.ANKAIOS_CONTROL_INTERFACE_BASE_PATH = FIFO_DIR


class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.seen = []

    def emit(self, record):
        if record.levelno == logging.WARNING:
            self.seen.append(record.getMessage())


warnings = Warnings()
logging.getLogger("Ankaios logger").addHandler(warnings)

script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sdk_conformance.py")
sys.argv = [script, AGENT]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as e:
    if e.code not in (0, None):
        raise
if warnings.seen:
    print("FAIL the SDK logged warnings:", *warnings.seen, sep="\n  ", flush=True)
    sys.exit(1)
print("NO SDK WARNINGS", flush=True)
sys.exit(0)
