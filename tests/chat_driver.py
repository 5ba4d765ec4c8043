#!/usr/bin/env python3
"""Drives `gemma3 chat` through a pseudo-terminal, as a person at a keyboard would.

usage: chat_driver.py turns TRANSCRIPT_JSON -- GEMMA3 chat -m DIR ...
         types two turns, saves the transcript and quits;
       chat_driver.py interrupt -- GEMMA3 chat -m DIR -n -1 ...
         presses Ctrl-C at the prompt (the chat must stay), then interrupts a long reply with
         Ctrl-C (the terminal's interrupt character, so the kernel sends SIGINT), checks the
         prompt comes back and still answers, and quits with Ctrl-D.
       chat_driver.py utf8 TRANSCRIPT_JSON -- GEMMA3 chat -m DIR ...
         types the messages of UTF8_MESSAGES (several scripts, CJK, emoji), one per turn, saves
         the transcript and quits.
Exits 0 on success, 1 with a message otherwise."""
import os, pty, select, sys, time

UTF8_MESSAGES = ["Define \"caf\u00e9\".", "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u0627\u0644\u0639\u0631\u0628\u064a\u0629",
                 "\u65e5\u672c\u8a9e \u4e2d\u6587 \ud55c\uad6d\uc5b4", "emoji \U0001f389\U0001f44d\U0001f3fd \u00fc\u00df\u00f1"]

def wait_exit(pid, fd, timeout=30.0):
    """The child's wait status, reading (and dropping) what it still prints so that it never
    blocks on a full terminal; a child still running after timeout seconds is a failure."""
    end = time.time() + timeout
    while time.time() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                os.read(fd, 4096)
            except OSError:
                pass
    raise TimeoutError("the chat did not exit within %g s" % timeout)


def main():
    sep = sys.argv.index("--")
    mode, argv = sys.argv[1], sys.argv[sep + 1:]
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

    def read_more(n, timeout=60.0):
        """Reads until n more bytes have come (the reply is streaming)."""
        nonlocal buf
        end, want = time.time() + timeout, len(buf) + n
        while len(buf) < want and time.time() < end:
            r, _, _ = select.select([fd], [], [], max(0.0, end - time.time()))
            if r:
                try:
                    data = os.read(fd, 4096)
                except OSError:
                    data = b""
                if not data:
                    raise EOFError("chat exited; screen so far: %r" % buf[-400:])
                buf += data

    try:
        read_until(b"> ")
        if mode == "turns":
            os.write(fd, b"Hi\r")
            read_until(b"> ")
            os.write(fd, b"How are you?\r")
            read_until(b"> ")
            os.write(fd, ("/save %s\r" % sys.argv[2]).encode())
            read_until(b"[saved")
            read_until(b"> ")
            os.write(fd, b"/quit\r")
        elif mode == "utf8":
            for text in UTF8_MESSAGES:
                time.sleep(0.3)  # the line editor may discard what is typed before it takes the terminal
                os.write(fd, text.encode("utf-8") + b"\r")
                read_until(b"> ")
            os.write(fd, ("/save %s\r" % sys.argv[2]).encode())
            read_until(b"[saved")
            read_until(b"> ")
            os.write(fd, b"/quit\r")
        else:
            time.sleep(0.5)  # let the line editor take the terminal, as a person's pause would
            os.write(fd, b"\x03")  # Ctrl-C at an empty prompt: a fresh prompt, no exit
            read_until(b"> ")
            os.write(fd, b"Tell me a very long story\r")
            read_until(b"story")
            # Ctrl-C mid-reply: once the reply streams (a fixed 1 s fell in the prefill on a
            # loaded machine, which drops the message instead)
            read_more(40)
            os.write(fd, b"\x03")
            read_until(b"[interrupted]")
            read_until(b"> ")
            time.sleep(0.5)  # the line editor may discard what is typed before it takes the terminal
            os.write(fd, b"/stats\r")
            read_until(b"context:")
            read_until(b"> ")
            time.sleep(0.5)
            os.write(fd, b"\x04")  # Ctrl-D exits
        status = wait_exit(pid, fd)
        if os.waitstatus_to_exitcode(status) != 0:
            print("chat exited with status %d; screen: %r" % (os.waitstatus_to_exitcode(status), buf[-400:]))
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
