"""One module per page group; each exports its ``routes``."""
