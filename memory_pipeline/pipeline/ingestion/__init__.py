"""Source files → documents / chunks → embeddings → search index, with their checks and sensors."""
