"""The viewer: ``memory-pipeline ui``'s web pages over one memory (``app``, ``pages``)."""
