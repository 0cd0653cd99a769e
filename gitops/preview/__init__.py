"""``seshat preview``: the plan a pull request's merge would produce, before the merge.

What belongs here: reading the pull request's two revisions (:mod:`.revisions`), telling
which resources it changes (:mod:`.changes`, on top of the reconciler's
:mod:`~gitops.reconcile.touched`), the read-only end of both lifecycles
(:mod:`.lifecycles`), the preview itself (:mod:`.run`), its markdown and JSON
(:mod:`.render`), publishing on GitHub and GitLab (:mod:`.forges`) and the command
(:mod:`.cli`). Nothing here writes to Git, a database or the state file.
"""
