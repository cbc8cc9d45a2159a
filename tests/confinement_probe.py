"""What a worker forked by the judge's fork server can reach, reported from inside it: the body of
a function under test that raises RuntimeError("PROBE{...}END") with its findings (the tests of the
fork server in test_multirank.py and test_adversarial.py put it into a submission)."""

from __future__ import annotations

import json
import re
import textwrap

PROBE_BODY = """\
import json, os, socket
found = {"caps": [], "ctl_sockets": 0, "parent_readable": [], "tests_visible": []}
found["parent"] = open(f"/proc/{os.getppid()}/cmdline", "rb").read().replace(b"\\0", b" ").decode()
for line in open("/proc/self/status").read().splitlines():
    if line.startswith(("CapEff", "CapPrm", "CapAmb")) and int(line.split()[1], 16):
        found["caps"].append(line)
for fd in map(int, os.listdir("/proc/self/fd")):
    try:
        s = socket.socket(fileno=os.dup(fd))
    except OSError:
        continue
    found["ctl_sockets"] += s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) == socket.SOCK_SEQPACKET
    s.close()
for name in ("mem", "environ", "maps"):
    try:
        open(f"/proc/{os.getppid()}/{name}", "rb").read(1)
        found["parent_readable"].append(name)
    except OSError:
        pass
for folder in ("tests", "hidden", ".judge"):
    try:
        if os.listdir(folder):
            found["tests_visible"].append(folder)
    except OSError:
        pass
raise RuntimeError("PROBE" + json.dumps(found) + "END")
"""


def probe_body(indent: str = "    ") -> str:
    return textwrap.indent(PROBE_BODY, indent)


def findings(text: str) -> list[dict]:
    """Every probe's report in a test's output."""
    return [json.loads(m) for m in re.findall(r"PROBE(\{.*?\})END", text)]


def assert_forked_and_confined(found: dict) -> None:
    """A child of the zygote, with no capability, no control socket, the zygote closed to it, and
    the test folders covered."""
    assert "autograder.worker.zygote" in found["parent"], found
    assert found["caps"] == [] and found["ctl_sockets"] == 0, found
    assert found["parent_readable"] == [] and found["tests_visible"] == [], found
