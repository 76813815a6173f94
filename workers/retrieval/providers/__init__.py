"""The RETRIEVAL worker's providers, one module each: ``memory`` (a memory store, read-only),
``corpus`` (a folder of text and Markdown files) and ``milvus`` (a Milvus collection through
``pymilvus``, the ``retrieval`` extra). Import the one you use: only ``milvus`` loads a driver."""
