"""Per-task scaffolding (few-shot block, instruction line) is learned, stripped, and kept out of the embeddings.

The prompts mimic RouterBench's: every prompt of a task opens with the same
worked examples and closes with the same instruction line, and only the middle
is the query. The routing test uses an encoder that, like all-MiniLM, keeps only
the first tokens of a text: without stripping, every query of a task looks the same.
"""

from __future__ import annotations

import json
import random
import re

import pandas as pd
import pytest

from jouleroute.routing.baselines.config import BaselinesConfig
from jouleroute.routing.baselines.embeddings import EmbeddingCache, HashingEmbedder, text_key
from jouleroute.routing.registry import build_router
from jouleroute.routing.scaffold import Scaffold, learn_scaffold, learn_scaffolds, strip_queries
from jouleroute.routing.baselines.train_table import build_train_table

ARC_PREFIX = (
    "The following are multiple choice questions about science.\n\n"
    "Question: Which gas do plants absorb?\nA. oxygen\nB. carbon dioxide\nAnswer: B\n\n"
    "Question: What melts ice?\nA. heat\nB. cold\nAnswer: A\n\n"
)
ARC_SUFFIX = '\nPrint only a single choice  from "A" or "B" without explanation.\nAnswer:'
WINO_PREFIX = "Fill the blank with the option that fits.\n\nSentence: The cup broke because _ fell. Answer: cup\n\n"
WINO_SUFFIX = "\nReply with the option only.\nAnswer:"
ARC_BODIES = [
    "Question: Which planet is largest?\nA. Jupiter\nB. Mars",
    "Question: What do bees make?\nA. honey\nB. silk",
    "Question: Where does rain come from?\nA. clouds\nB. rocks",
    "Question: Why is the sky blue?\nA. scattering\nB. paint",
    "Question: How many legs has a spider?\nA. eight\nB. six",
]
PAIRS = [("Ann", "Bo"), ("Cy", "Di"), ("Ed", "Flo"), ("Gus", "Hal"), ("Ivy", "Jo"), ("Kim", "Lu")]
WINO_BODIES = [f"Sentence: {who} gave {whom} the book because _ was done. Option: {who}" for who, whom in PAIRS]


def test_learns_exactly_the_shared_parts_of_two_tasks():
    texts = {"arc": [ARC_PREFIX + b + ARC_SUFFIX for b in ARC_BODIES],
             "wino": [WINO_PREFIX + b + WINO_SUFFIX for b in WINO_BODIES]}
    scaffolds = learn_scaffolds(texts)
    # The common prefix runs on into "Question: " / "Sentence: ", cut back to the last line break.
    assert scaffolds == {"arc": Scaffold(ARC_PREFIX, ARC_SUFFIX), "wino": Scaffold(WINO_PREFIX, WINO_SUFFIX)}
    assert strip_queries(texts["arc"], ["arc"] * 5, scaffolds) == ARC_BODIES
    mixed = strip_queries(texts["wino"] + texts["arc"][:1], ["wino"] * 6 + ["arc"], scaffolds)
    assert mixed == WINO_BODIES + ARC_BODIES[:1]
    shuffled = {task: random.Random(1).sample(t, len(t)) for task, t in texts.items()}
    assert learn_scaffolds(shuffled) == scaffolds  # deterministic, whatever the order


def test_parts_ending_mid_word_are_snapped_to_whole_words():
    words = ["photosynthesis interaction", "photons transaction", "photography reaction", "photocopy action",
             "photosphere traction"]
    texts = [f"Read the passage and answer: {w}. Answer in one word please." for w in words]
    # Raw common prefix "...answer: phot" and suffix "action. Answer...": both cut inside words.
    scaffold = learn_scaffold(texts)
    assert scaffold == Scaffold("Read the passage and answer: ", " Answer in one word please.")
    assert [scaffold.strip(t) for t in texts] == [f"{w}." for w in words]


def test_too_few_prompts_or_too_short_parts_give_no_scaffold():
    texts = [ARC_PREFIX + b + ARC_SUFFIX for b in ARC_BODIES[:4]]
    assert learn_scaffolds({"arc": texts}) == {"arc": Scaffold()}  # 4 < min_prompts
    assert learn_scaffolds({"arc": texts + texts}) == {"arc": Scaffold()}  # repeats are not new prompts
    assert learn_scaffold(texts, min_prompts=4) == Scaffold(ARC_PREFIX, ARC_SUFFIX)
    assert not Scaffold() and Scaffold(suffix="x")
    short = [f"Q: item {i} done" for i in range(6)]  # shares "Q: item " and " done", under min_chars
    assert learn_scaffold(short) == Scaffold()
    assert learn_scaffold(short, min_chars=5) == Scaffold("Q: item ", " done")
    with pytest.raises(ValueError, match="min_prompts"):
        learn_scaffold(texts, min_prompts=1)


def test_texts_with_nothing_in_common_are_unchanged():
    texts = ["  apples are red ", "the sky is blue", "Dogs bark loudly", "seven plus two", "Quartz is hard"]
    scaffolds = learn_scaffolds({"misc": texts})
    assert scaffolds == {"misc": Scaffold()}
    assert strip_queries(texts, ["misc"] * 5, scaffolds) == [t.strip() for t in texts]
    assert strip_queries(["  other task "], ["unseen"], scaffolds) == ["other task"]
    with pytest.raises(ValueError, match="2 questions but 1 tasks"):
        strip_queries(["a", "b"], ["misc"], scaffolds)


def test_prefix_and_suffix_never_overlap_and_stripping_never_empties():
    head, tail = "Intro block, line one\n", "\nClosing instruction line"
    # The empty query makes the common suffix "\n" + tail reach into the head of the shortest text.
    colours = ["red", "green", "blue", "pink"]
    texts = [head + tail] + [head + f"{w} query\n" + tail for w in colours]
    scaffold = learn_scaffold(texts)
    assert scaffold == Scaffold(head, tail)  # suffix shrunk to fit, still on a line break
    assert len(scaffold.prefix) + len(scaffold.suffix) <= min(map(len, texts))
    assert [scaffold.strip(t) for t in texts] == [(head + tail).strip()] + [f"{w} query" for w in colours]
    repeated = ["la " * n for n in range(10, 15)]  # everything is shared: the prefix eats the shortest
    scaffold = learn_scaffold(repeated)
    assert len(scaffold.prefix) + len(scaffold.suffix) <= min(map(len, repeated))
    assert all(scaffold.strip(t) for t in repeated)
    assert Scaffold("Question: ", "Answer:").strip(" Question: Answer: ") == "Question: Answer:"


def test_scaffold_round_trips_through_json():
    scaffold = Scaffold(ARC_PREFIX, ARC_SUFFIX)
    assert Scaffold.from_dict(json.loads(json.dumps(scaffold.to_dict()))) == scaffold
    assert Scaffold.from_dict({}) == Scaffold()


# --- in the embedding baselines -------------------------------------------------------------------

CANDIDATES = ["tiny", "big"]
KINDS = {  # kind of question: (template, candidates that answer it)
    "sum": ("Question: add {a} plus {b} and give the sum", {"tiny", "big"}),
    "proof": ("Question: prove the theorem lemma {a} bound {b}", {"big"}),
}
CFG = BaselinesConfig(embedding={"model": "hashing", "cache_dir": None}, knn={"k": 5})


class TruncatingEmbedder(HashingEmbedder):
    """The hashing encoder on the first ``max_tokens`` words only (as all-MiniLM keeps 256 tokens);
    records the texts it really encodes."""

    def __init__(self, max_tokens: int = 24, **kwargs):
        super().__init__(**kwargs)
        self.max_tokens = max_tokens
        self.encoded: list[str] = []

    @property
    def model_key(self) -> str:
        return f"first{self.max_tokens}-{super().model_key}"

    def encode(self, texts):
        self.encoded += texts
        return super().encode([" ".join(re.findall(r"\w+", t)[: self.max_tokens]) for t in texts])


def _tables(n: int, split: str, offset: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Task "arc": ARC-style prompts whose few-shot block alone is longer than the encoder keeps."""
    queries, rows = [], []
    for kind, (template, right) in KINDS.items():
        for i in range(offset, offset + n):
            qid = f"arc/{kind}/{i}"
            body = template.format(a=i, b=3 * i + 1)
            queries.append({"query_id": qid, "task": "arc", "split": split, "body": body,
                            "question": ARC_PREFIX + body + ARC_SUFFIX})
            rows += [{"query_id": qid, "candidate_id": c, "task": "arc", "split": split, "correct": int(c in right),
                      "energy_j": {"tiny": 1.0, "big": 10.0}[c], "energy_source": "estimated"} for c in CANDIDATES]
    return pd.DataFrame(rows), pd.DataFrame(queries)


TRAIN_PROFILE, TRAIN_QUERIES = _tables(10, "train", 0)
_, TEST_QUERIES = _tables(3, "test", 100)


def _kind_of(query_id: str) -> str:
    return query_id.split("/")[1]


def test_prompts_look_alike_to_a_truncating_encoder_unless_stripped():
    assert len(re.findall(r"\w+", ARC_PREFIX)) > TruncatingEmbedder().max_tokens
    no_strip = CFG.model_copy(update={"strip_scaffold": False})
    plain = build_router("knn", TRAIN_PROFILE, TRAIN_QUERIES, CANDIDATES, no_strip, embedder=TruncatingEmbedder())
    assert plain.scaffolds == {}
    assert len(set(plain.route(TEST_QUERIES).candidate_ids)) == 1  # one vector for the whole task

    stripped = build_router("knn", TRAIN_PROFILE, TRAIN_QUERIES, CANDIDATES, CFG, embedder=TruncatingEmbedder())
    assert stripped.scaffolds == {"arc": Scaffold(ARC_PREFIX, ARC_SUFFIX)}
    decisions = stripped.score(TEST_QUERIES).decide(0.2)
    by_kind: dict[str, set[str]] = {}
    for qid, cand in zip(decisions.query_ids, decisions.candidate_ids):
        by_kind.setdefault(_kind_of(qid), set()).add(cand)
    assert by_kind == {"sum": {"tiny"}, "proof": {"big"}}


def test_training_and_routing_embed_the_stripped_text(tmp_path):
    embedder = TruncatingEmbedder(cache_dir=tmp_path)
    router = build_router("knn", TRAIN_PROFILE, TRAIN_QUERIES, CANDIDATES, CFG, embedder=embedder)
    cached = EmbeddingCache(tmp_path, embedder.model_key).load()
    assert set(cached) == {text_key(b) for b in TRAIN_QUERIES["body"]}  # stripped texts, not raw prompts
    embedder.encoded.clear()
    router.score(TEST_QUERIES)
    assert embedder.encoded == TEST_QUERIES["body"].tolist()
    with pytest.raises(ValueError, match="'task' column"):
        router.score(TEST_QUERIES.drop(columns="task"))


def test_train_table_carries_the_task_of_each_query():
    table = build_train_table(TRAIN_PROFILE, TRAIN_QUERIES, CANDIDATES)
    assert table.tasks == ["arc"] * len(TRAIN_QUERIES)
    from_profile = build_train_table(TRAIN_PROFILE, TRAIN_QUERIES.drop(columns="task"), CANDIDATES)
    assert from_profile.tasks == table.tasks
    neither = build_train_table(TRAIN_PROFILE.drop(columns="task"), TRAIN_QUERIES.drop(columns="task"), CANDIDATES)
    assert neither.tasks is None
