#!/usr/bin/env python3
"""Drives `gemma3 chat` through a pseudo-terminal, as a person at a keyboard would.

usage: chat_driver.py TRANSCRIPT_JSON -- GEMMA3 chat -m DIR ...
Types two turns, interrupts a third reply with Ctrl-C (the terminal's interrupt character, so
the kernel sends SIGINT), checks the prompt comes back, saves the transcript and quits.
Exits 0 on success, 1 with a message otherwise."""
import os, pty, select, sys, time

def main():
    sep = sys.argv.index("--")
    transcript, argv = sys.argv[1], sys.argv[sep + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    buf = b""

    def read_until(token, timeout=60.0):
        nonlocal buf
        end = time.time() + timeout
        while token not in buf:
            left = end - time.time()
            if left <= 0:
                raise TimeoutError("waiting for %r; screen so far: %r" % (token, buf[-400:]))
            r, _, _ = select.select([fd], [], [], left)
            if r:
                try:
                    data = os.read(fd, 4096)
                except OSError:
                    data = b""
                if not data:
                    raise EOFError("chat exited; screen so far: %r" % buf[-400:])
                buf += data
        i = buf.index(token) + len(token)
        seen, buf = buf[:i], buf[i:]
        return seen

    try:
        read_until(b"> ")
        os.write(fd, b"Hi\r")
        read_until(b"> ")
        os.write(fd, b"How are you?\r")
        read_until(b"> ")
        os.write(fd, b"Tell me a very long story\r")
        time.sleep(1.0)
        os.write(fd, b"\x03")  # Ctrl-C mid-reply
        read_until(b"[interrupted]")
        read_until(b"> ")
        os.write(fd, ("/save %s\r" % transcript).encode())
        read_until(b"[saved")
        read_until(b"> ")
        os.write(fd, b"/quit\r")
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            print("chat exited with status %d" % os.waitstatus_to_exitcode(status))
            return 1
    except (TimeoutError, EOFError) as e:
        print(e)
        try:
            os.kill(pid, 9)
        except OSError:
            pass
        return 1
    return 0

sys.exit(main())
