"""mcplint guest: a server's stdin/stdout over a vsock connection to the host.

Used under Firecracker, which has no virtio-serial (see src/runner/firecracker.rs).
Usage: vsock-bridge.py vsock:PORT PROGRAM ARGS...  (or unix:PATH, for tests on
the host). Connects first, so the host knows the server is being started;
then runs PROGRAM with one pipe as its stdin and one as its stdout (a vsock
cannot be a Node.js stdio stream) and copies bytes both ways. End of input
from the host closes the server's stdin; the server's end of output shuts the
connection's write side. Exits with the server's status. Errors go to
stderr (the serial console), never to the MCP stream.
"""
import os
import socket
import sys
import threading


def connect(spec):
    kind, _, where = spec.partition(":")
    if kind == "vsock":
        s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
        s.connect((socket.VMADDR_CID_HOST, int(where)))
    elif kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(where)
    else:
        raise ValueError("unknown channel %r" % spec)
    return s


def write_all(fd, data):
    while data:
        n = os.write(fd, data)
        data = data[n:]


def main():
    if len(sys.argv) < 3:
        sys.stderr.write("usage: vsock-bridge.py vsock:PORT|unix:PATH PROGRAM ARGS...\n")
        return 64
    try:
        s = connect(sys.argv[1])
    except (OSError, ValueError) as e:
        sys.stderr.write("mcplint-guest: error: cannot connect the MCP channel %s: %s\n" % (sys.argv[1], e))
        return 69
    to_server_r, to_server_w = os.pipe()
    from_server_r, from_server_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(to_server_r, 0)
            os.dup2(from_server_w, 1)
            for fd in (to_server_r, to_server_w, from_server_r, from_server_w, s.fileno()):
                os.close(fd)
            os.execv(sys.argv[2], sys.argv[2:])
        except OSError as e:
            sys.stderr.write("mcplint-guest: error: cannot start %s: %s\n" % (sys.argv[2], e))
        os._exit(127)
    os.close(to_server_r)
    os.close(from_server_w)

    def host_to_server():
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    break
                write_all(to_server_w, data)
        except OSError:
            pass
        os.close(to_server_w)

    threading.Thread(target=host_to_server, daemon=True).start()
    try:
        while True:
            data = os.read(from_server_r, 65536)
            if not data:
                break
            s.sendall(data)
    except OSError:
        pass
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
