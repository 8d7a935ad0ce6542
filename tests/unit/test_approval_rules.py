"""Allow / ask / deny rules: layers, most specific pattern first, stricter on a tie."""

from __future__ import annotations

from freeact_sub.policy.approvals import ApprovalRules, RuleMatch, specificity


def test_an_exact_name_beats_a_glob_and_more_literal_characters_win() -> None:
    rules = ApprovalRules(
        [("approvals", {"*": "deny", "files_*": "ask", "files_read_*": "allow", "files_read_secret": "deny"})]
    )
    assert rules.match("files_read_text").rule == "allow"  # type: ignore[union-attr]
    assert rules.match("files_read_secret").rule == "deny"  # type: ignore[union-attr]
    assert rules.match("files_write").rule == "ask"  # type: ignore[union-attr]
    assert rules.match("calc_add").rule == "deny"  # type: ignore[union-attr]
    assert specificity("files_read_secret") > specificity("files_read_*") > specificity("files_*")


def test_on_a_tie_the_stricter_rule_wins() -> None:
    rules = ApprovalRules([("approvals", {"a_*": "allow", "*_b": "deny"})])
    assert rules.match("a_b").rule == "deny"  # type: ignore[union-attr]


def test_a_type_layers_deny_beats_a_more_specific_global_allow() -> None:
    rules = ApprovalRules([("approvals", {"files_write_text": "allow"})]).under(
        "agent type reviewer", {"files_*": "deny"}
    )
    match = rules.match("files_write_text")
    assert match is not None and match.rule == "deny" and match.source == "agent type reviewer"
    assert str(match) == "'files_*': deny (agent type reviewer)"
    assert rules.match("calc_add") is None


def test_a_deny_anywhere_up_the_chain_is_final() -> None:
    # the global rules deny cells, a parent type denies a server's writes; a child type allows everything
    chain = (
        ApprovalRules([("approvals", {"execute_ipython_cell": "deny"})])
        .under("agent type parent", {"files_write_*": "deny", "calc_*": "allow"})
        .under("agent type child", {"*": "allow"})
    )
    assert chain.match("execute_ipython_cell") == RuleMatch("deny", "execute_ipython_cell", "approvals")
    assert chain.match("files_write_text") == RuleMatch("deny", "files_write_*", "agent type parent")
    assert chain.match("calc_add") == RuleMatch("allow", "*", "agent type child")


def test_an_ask_in_any_layer_beats_an_allow_in_another() -> None:
    above = ApprovalRules([("approvals", {"*": "allow"})]).under("agent type child", {"files_*": "ask"})
    below = ApprovalRules([("approvals", {"files_*": "ask"})]).under("agent type child", {"*": "allow"})
    assert above.match("files_read") == RuleMatch("ask", "files_*", "agent type child")
    assert below.match("files_read") == RuleMatch("ask", "files_*", "approvals")
    assert below.match("calc_add") == RuleMatch("allow", "*", "agent type child")


def test_empty_layers_are_dropped() -> None:
    assert ApprovalRules([("a", {}), ("b", {})]).layers == []
