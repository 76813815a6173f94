"""Build ``bench/data/squad_dev``: SQuAD v1.1's development set as a BEIR-format retrieval set.

Source: the SQuAD v1.1 development set (Rajpurkar et al., 2016, CC BY-SA 4.0): 48 Wikipedia
articles, 2,067 paragraphs, 10,570 crowd-written questions, each asked about one paragraph.
Used as a retrieval task the way ReQA (Ahmad et al., 2019) does: find the paragraph a question
was written from. The input is the development set as two JSON files that hold its articles
between them (the public repository ``bloomsburyai/question-generation`` at commit
``88cc78cb56123efdf20abb0f4640a0405f1291e3``, ``data/dev-v1.1.json`` and
``data/test-v1.1.json``: Du et al.'s article-level halves of the official file). Their SHA-256
digests are checked, and their union is checked to be the whole set (the counts above).

Output, written deterministically (gzip with a fixed timestamp):

* ``corpus.jsonl.gz`` — one document per paragraph: ``_id`` = ``<article>-<paragraph index>``,
  ``title`` = the article's title, ``text`` = the paragraph. Articles in the order of the two
  files, paragraphs in article order (so a session of consecutive documents is a run of one
  article's paragraphs).
* ``queries.jsonl.gz`` — the first question of each paragraph (2,067 queries; all 10,570 would
  make the harness five times slower and add little).
* ``qrels.tsv.gz`` — each query's paragraph, gain 1.

    .venv/bin/python bench/data/squad_dev/make_squad_dev.py DEV.json TEST.json
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent
SOURCES = {
    "bf8ebb60a161d0594f455be869ff3a476d2fe07da92ab1ecb0dea41f50ea64f3",  # data/dev-v1.1.json
    "f0a16b507dbb983d1a04315b6a189e539aa15c91c4ccfb849b0392593daf80dd",  # data/test-v1.1.json
}
EXPECTED = {"articles": 48, "paragraphs": 2067, "questions": 10570}


def _write(name: str, lines: list[str]) -> None:
    payload = "".join(f"{line}\n" for line in lines).encode("utf-8")
    (OUT / name).write_bytes(gzip.compress(payload, compresslevel=9, mtime=0))


def main(paths: list[str]) -> None:
    articles = []
    for path in paths:
        raw = Path(path).read_bytes()
        digest = hashlib.sha256(raw).hexdigest()
        if digest not in SOURCES:
            raise SystemExit(f"{path} is not one of the expected source files (sha256 {digest})")
        articles.extend(json.loads(raw)["data"])
    counts = {
        "articles": len(articles),
        "paragraphs": sum(len(article["paragraphs"]) for article in articles),
        "questions": sum(len(p["qas"]) for article in articles for p in article["paragraphs"]),
    }
    if counts != EXPECTED:
        raise SystemExit(f"the two files are not the whole development set: {counts}")
    corpus, queries, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    for article in articles:
        title = article["title"].replace("_", " ")
        for number, paragraph in enumerate(article["paragraphs"]):
            doc_id = f"{article['title']}-{number}"
            corpus.append(json.dumps({"_id": doc_id, "title": title, "text": paragraph["context"]}))
            question = paragraph["qas"][0]
            queries.append(json.dumps({"_id": question["id"], "text": question["question"]}))
            qrels.append(f"{question['id']}\t{doc_id}\t1")
    _write("corpus.jsonl.gz", corpus)
    _write("queries.jsonl.gz", queries)
    _write("qrels.tsv.gz", qrels)
    print(f"wrote {len(corpus)} documents and {len(queries)} queries into {OUT}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
