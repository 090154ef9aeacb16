"""What the memory refuses to keep: secrets, ``<private>`` spans, its own answers.

Plain functions on text (``secrets``, ``private``, ``echo``) and one ``Redactor`` that the
ingestion path passes every text through before it is chunked, embedded or stored
(docs/hygiene.md).

The modules are imported by name (``hygiene.redactor``, ``hygiene.private``, …): a hook that
only fences its output must not load the secret rules.
"""
