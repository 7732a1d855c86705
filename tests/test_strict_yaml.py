"""The YAML reading every config file shares (jouleroute/strict.py): repeated keys refused, merges kept."""

import pytest
import yaml

from jouleroute.strict import UniqueKeyLoader, yaml_only_value


def test_a_merge_key_merges_and_a_repeated_key_is_refused():
    text = "base: &b {x: 1, y: 1}\nother:\n  <<: *b\n  y: 2\n"
    assert yaml.load(text, Loader=UniqueKeyLoader) == yaml.safe_load(text)  # PyYAML's merge, unchanged
    with pytest.raises(yaml.YAMLError, match="'y' is given twice in one mapping"):
        yaml.load("y: 1\ny: 2\n", Loader=UniqueKeyLoader)


def test_only_values_yaml_types_beyond_json_are_named():
    plain = yaml.safe_load("a: 1\nb: 1.5\nc: .inf\nd: true\ne: null\nf: [x, 2]\n3: int key\n")
    assert yaml_only_value(plain) is None
    assert "a.b: YAML reads 2024-01-01 as a date" in yaml_only_value(yaml.safe_load("a: {b: 2024-01-01}"))
