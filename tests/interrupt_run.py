#!/usr/bin/env python3
"""Ctrl-C in a command that runs long passes and then reports (perplexity, bench): once READY
has appeared on its stdout (the first chunk's estimate, the first row; '' for none) and DELAY
seconds more (so that the signal lands inside a pass), SIGINT; the command must end by SIGINT (as Ctrl-C ends
generate: a shell's $? is 130) within STOP_S seconds.

usage: interrupt_run.py READY DELAY STOP_S OUT ERR -- GEMMA3 ARGS...
Writes the command's stdout and stderr to OUT and ERR, prints how long the stop took; exits 0
on success, 1 with a message otherwise."""
import os, signal, subprocess, sys, time


def main():
    ready, delay, stop_s, out_path, err_path = sys.argv[1].encode(), float(sys.argv[2]), \
        float(sys.argv[3]), sys.argv[4], sys.argv[5]
    cmd = sys.argv[sys.argv.index('--') + 1:]
    with open(out_path, 'wb') as out_f, open(err_path, 'wb') as err_f:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err_f)
        os.set_blocking(p.stdout.fileno(), False)
        seen, end = b'', time.time() + 120
        while ready and ready not in seen and time.time() < end and p.poll() is None:
            try:
                seen += os.read(p.stdout.fileno(), 65536) or b''
            except BlockingIOError:
                time.sleep(0.005)
        if ready not in seen:
            p.kill()
            print('%r never appeared on stdout (exit %s)' % (ready, p.wait()))
            return 1
        time.sleep(delay)
        t0 = time.time()
        p.send_signal(signal.SIGINT)
        os.set_blocking(p.stdout.fileno(), True)
        seen += p.stdout.read()
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        took = time.time() - t0
        out_f.write(seen)
    print('stopped %.3f s after SIGINT, %s' % (took, 'by SIGINT' if rc == -signal.SIGINT else 'exit %d' % rc))
    if rc != -signal.SIGINT:
        print('the command did not end by SIGINT: exit status %d' % rc)
        return 1
    if took > stop_s:
        print('it stopped %.3f s after SIGINT (more than %.1f s)' % (took, stop_s))
        return 1
    return 0


sys.exit(main())
