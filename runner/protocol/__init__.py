"""The runner's result protocol: exactly one framed JSON result on stdout.

``frame.py`` writes and finds frames; ``messages.py`` is an operation's input and the frame's
payload; ``results.py`` is each operation's typed result and the error codes. The control
plane imports these pure modules (and only such modules of the runner) to speak to a runner.
"""
