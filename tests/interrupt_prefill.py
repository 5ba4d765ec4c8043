#!/usr/bin/env python3
"""Ctrl-C during a chat's prefill: the chat must stop it within STOP_S seconds, drop that message
and answer the next one as if the dropped one had never been sent.

usage: interrupt_prefill.py LONG_MESSAGE_FILE WANT_REPLY_FILE -- GEMMA3 chat ...
Prints how long the stop took; exits 0 on success, 1 with a message otherwise."""
import os, signal, subprocess, sys, time

STOP_S = 0.5

def sigint_caught(pid):
    try:
        for line in open('/proc/%d/status' % pid):
            if line.startswith('SigCgt:'):
                return int(line.split()[1], 16) & (1 << (signal.SIGINT - 1))
    except OSError:
        pass
    return False

def cpu_ticks(pid):
    """utime + stime of the process, in clock ticks (/proc/PID/stat fields 14 and 15)."""
    try:
        fields = open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0

def main():
    long_msg = open(sys.argv[1], 'rb').read().rstrip(b'\n') + b'\n'
    want = open(sys.argv[2], 'rb').read()
    cmd = sys.argv[sys.argv.index('--') + 1:]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.set_blocking(p.stderr.fileno(), False)
    # the chat catches SIGINT once the model is loaded (before, Ctrl-C ends the program): wait
    # for its handler, then give it the message and let the prefill begin
    end = time.time() + 60
    while time.time() < end and not sigint_caught(p.pid):
        time.sleep(0.01)
    # SIGINT once the prefill is under way: the chat's CPU time has grown by a clock tick since
    # the message went in (a fixed 0.1 s sleep was as long as the whole prefill on a fast CPU,
    # and the signal then fell in the reply)
    cpu0 = cpu_ticks(p.pid)
    p.stdin.write(long_msg)
    p.stdin.flush()
    end = time.time() + 10
    while time.time() < end and cpu_ticks(p.pid) < cpu0 + 2:
        time.sleep(0.002)
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    err = b''
    while b'[interrupted' not in err and time.time() - t0 < 30:
        try:
            err += os.read(p.stderr.fileno(), 65536) or b''
        except BlockingIOError:
            time.sleep(0.005)
    took = time.time() - t0
    try:
        p.stdin.write(b'Hi\n')
        p.stdin.close()
    except BrokenPipeError:
        pass
    out = p.stdout.read()
    os.set_blocking(p.stderr.fileno(), True)
    err += p.stderr.read()
    p.wait()
    print('stopped %.3f s after SIGINT' % took)
    if b'[interrupted before the reply: the message is dropped]' not in err:
        print('no interrupted-prefill line; stderr: %r' % err[-300:]); return 1
    if took > STOP_S:
        print('the prefill stopped %.3f s after SIGINT (more than %.1f s)' % (took, STOP_S)); return 1
    # the first message's reply line is empty (nothing generated): the second is the reply
    if out.lstrip(b'\n') != want:
        print('reply after the dropped message %r != a fresh chat\'s %r' % (out, want)); return 1
    return 0

sys.exit(main())
