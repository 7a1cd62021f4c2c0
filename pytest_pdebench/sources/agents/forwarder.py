"""Inside an agent's sandbox: serve the metering proxy's unix socket on the sandbox's own
loopback, then become the agent.

    python3 forwarder.py SOCKET PORT COMMAND...

The sandbox has no network but its loopback, so an agent that wants a URL gets
http://127.0.0.1:PORT, and every byte goes through the one socket the harness bound in.
The listening socket is open before the agent starts (no race); the relay lives in a
forked child that dies with the sandbox. Standard library only: it runs on the
sandbox's system Python.
"""

import os
import socket
import sys
import threading


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while True:
            chunk = source.recv(65536)
            if not chunk:
                break
            target.sendall(chunk)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # answers arrive in pieces: no Nagle wait
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            client.close()
            upstream.close()
            continue
        threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()


def main(argv: list[str]) -> None:
    if len(argv) < 4:
        sys.exit("usage: forwarder.py SOCKET PORT COMMAND...")
    path, port, command = argv[1], int(argv[2]), argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if os.fork() == 0:  # the relay: no terminal, no pipes of the agent's held open
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        _serve(listener, path)
        os._exit(0)
    listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
