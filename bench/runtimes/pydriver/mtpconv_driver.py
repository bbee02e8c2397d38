"""mtpconv bench's runner for an in-process Python runtime (written next to the
runtime's runtime_driver.py in a temporary folder and run with the user's
Python, one process per arm run).

The protocol is JSON lines: stdin carries the start line, then one request per
line; stdout carries one reply per line: {"ready": {"version": V}} after the
start line, {"result": {...}} per request, or {"error": MESSAGE}. Anything else
the runtime prints goes to stderr (fd 1 is pointed at it), which mtpconv keeps
in its log. The end of stdin ends the process.

This file keeps to syntax old Pythons parse, so that a too-old Python gets a
one-line answer instead of a SyntaxError.
"""
import json
import os
import sys

MIN_PYTHON = (3, 9)


def version_tuple(text):
    """The leading numeric fields of a version string: '2026.4.1.0-3408' -> (2026, 4, 1, 0)."""
    out = []
    for field in text.replace("-", ".").replace("+", ".").split("."):
        digits = ""
        for c in field:
            if not c.isdigit():
                break
            digits += c
        if digits == "":
            break
        out.append(int(digits))
    return tuple(out)


def missing(requires):
    """The one-line reason a requirement is not met, or None. requires: (distribution, minimum, install command)."""
    from importlib import metadata
    for dist, minimum, install in requires:
        try:
            have = metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "%s is not installed for %s: %s" % (dist, sys.executable, install)
        if version_tuple(have) < version_tuple(minimum):
            return "%s %s is older than %s (%s): %s" % (dist, have, minimum, sys.executable, install)
    return None


class Reply(object):
    """The protocol's output: a private copy of fd 1, with fd 1 itself pointed at stderr."""

    def __init__(self):
        self.out = os.fdopen(os.dup(1), "w", encoding="utf-8")
        os.dup2(2, 1)
        sys.stdout = sys.stderr

    def send(self, obj):
        self.out.write(json.dumps(obj) + "\n")
        self.out.flush()


def main():
    if sys.version_info[:2] < MIN_PYTHON:
        msg = "Python %d.%d (%s) is too old for mtpconv bench's driver: it needs %d.%d or newer" % (
            sys.version_info[0], sys.version_info[1], sys.executable, MIN_PYTHON[0], MIN_PYTHON[1])
        sys.stdout.write(json.dumps({"error": msg}) + "\n")
        return 1
    reply = Reply()
    import runtime_driver
    why = missing(runtime_driver.REQUIRES)
    if why is not None:
        reply.send({"error": why})
        return 1
    line = sys.stdin.readline()
    if not line:
        return 0
    try:
        session = runtime_driver.start(json.loads(line))
    except Exception as e:  # the runtime's own message, whatever its type
        import traceback
        traceback.print_exc()
        reply.send({"error": "%s: %s" % (type(e).__name__, e)})
        return 1
    reply.send({"ready": {"version": runtime_driver.version()}})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            result = session.generate(json.loads(line))
        except Exception as e:
            import traceback
            traceback.print_exc()
            reply.send({"error": "%s: %s" % (type(e).__name__, e)})
            continue
        reply.send({"result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
