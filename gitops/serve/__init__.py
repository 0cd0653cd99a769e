"""``seshat run --listen``: the HTTP server (metrics, health, webhooks) and what it answers.

Nothing here reconciles: the server reads the health the run loop reports and, for a
verified push webhook, wakes the loop (:mod:`gitops.runloop`). Add an endpoint in
:mod:`.http`; a forge's proof of the secret in :mod:`.webhooks`.
"""
