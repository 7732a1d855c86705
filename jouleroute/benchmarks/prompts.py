"""Prompt templates: zero-shot chat messages for instruct models, few-shot completions for base models.

Both styles ask for the same final form, ``Answer: X`` (chat) or ``So the answer is X.`` /
``Answer: X`` (few-shot), so one extractor reads every candidate's output. Prompts are short
on purpose: on CPU every prompt token costs time and energy.
"""

from __future__ import annotations

from typing import Literal, Sequence

AnswerStyle = Literal["direct", "cot"]
ANSWER_STYLES = ("direct", "cot")
COT_OPENER = "Let's think step by step."


def check_style(answer_style: str) -> None:
    if answer_style not in ANSWER_STYLES:
        raise ValueError(f"unknown answer_style {answer_style!r}; valid: {', '.join(ANSWER_STYLES)}")


def chat_instruction(answer_style: str, hint: str) -> str:
    check_style(answer_style)
    if answer_style == "direct":
        return f'Reply with only the final answer, as "Answer: {hint}".'
    return f'Think step by step, then give the final answer on the last line as "Answer: {hint}".'


def chat_messages(question: str, answer_style: str, hint: str) -> list[dict[str, str]]:
    # One user turn, no system turn: some chat templates (Gemma) reject a system role.
    return [{"role": "user", "content": f"{question}\n\n{chat_instruction(answer_style, hint)}"}]


def exemplar_answer(exemplar: dict, answer_style: str, shown_gold: str) -> str:
    """The text after "Answer:" in a solved exemplar. CoT exemplars need a worked solution;
    sources without one (MMLU, ARC, HellaSwag) show the bare answer in both styles."""
    rationale = exemplar.get("rationale")
    if answer_style == "cot" and rationale:
        return f"{COT_OPENER} {rationale.strip()} So the answer is {shown_gold}."
    return shown_gold


def fewshot_prompt(
    question: str,
    exemplars: Sequence[dict],
    answer_style: str,
    show_gold,
    header: str = "",
) -> str:
    """``Question: ...\\nAnswer: ...`` blocks, then the query with an open ``Answer:``."""
    check_style(answer_style)
    blocks = [f"Question: {ex['question']}\nAnswer: {exemplar_answer(ex, answer_style, show_gold(ex['gold']))}"
              for ex in exemplars]
    opener = f" {COT_OPENER}" if answer_style == "cot" else ""
    blocks.append(f"Question: {question}\nAnswer:{opener}")
    return (f"{header}\n\n" if header else "") + "\n\n".join(blocks)


def stop_sequences(answer_style: str = "cot") -> tuple[str, ...]:
    """Where a base model's completion should stop: at the next exemplar it starts inventing.
    A direct answer is one line, so a blank line also ends it; CoT solutions may contain
    blank lines (MATH), so only a new "Question:" ends those."""
    check_style(answer_style)
    return ("\n\n", "\nQuestion:") if answer_style == "direct" else ("\nQuestion:",)
