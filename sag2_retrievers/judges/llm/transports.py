"""The batched completions transport: chat templates, request splitting, reading replies.

vLLM's ``/v1/completions`` (and other servers modelled on OpenAI's legacy completions API)
take a list of prompts in one request and, with ``logprobs: N``, return each prompt's first
token with its top N alternatives as ``choices[i].logprobs.top_logprobs[0]`` (a token ->
logprob object), ``choices[i].index`` naming the prompt. The judge renders each
conversation with the model's chat template itself, so the prompt scored is the one the
chat endpoint would have rendered from the same messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InvalidInputError, JudgeError
from .prompts import ChatMessages

CONTENT = "{content}"


@dataclass(frozen=True)
class ChatTemplate:
    """How a model's chat template renders a system + user conversation up to its answer.

    ``system`` and ``user`` hold ``{content}`` where the message goes; ``generation`` opens
    the assistant's turn. Pass a callable instead (for example a tokenizer's
    ``apply_chat_template(messages, tokenize=False, add_generation_prompt=True)``) when the
    model's template is more than that.
    """

    name: str
    system: str
    user: str
    generation: str

    def __post_init__(self) -> None:
        for part in ("system", "user"):
            if getattr(self, part).count(CONTENT) != 1:
                raise InvalidInputError(
                    f"ChatTemplate {self.name!r}: {part} must hold {CONTENT} exactly once"
                )

    def __call__(self, messages: ChatMessages) -> str:
        """The rendered prompt, ending where the model's answer begins."""
        parts = {"system": self.system, "user": self.user}
        rendered = [parts[m["role"]].replace(CONTENT, m["content"]) for m in messages]
        return "".join(rendered) + self.generation


# ChatML, the template of Qwen 2.5 and many fine-tunes: the default.
CHATML = ChatTemplate(
    "chatml",
    "<|im_start|>system\n{content}<|im_end|>\n",
    "<|im_start|>user\n{content}<|im_end|>\n",
    "<|im_start|>assistant\n",
)
# Llama 3.x instruct; the server adds <|begin_of_text|> itself when it tokenizes a prompt.
LLAMA3 = ChatTemplate(
    "llama3",
    "<|start_header_id|>system<|end_header_id|>\n\n{content}<|eot_id|>",
    "<|start_header_id|>user<|end_header_id|>\n\n{content}<|eot_id|>",
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
)

# Gemma 2 and 3 have no system turn: the instruction opens the user turn, as their template does.
GEMMA = ChatTemplate(
    "gemma",
    "<start_of_turn>user\n{content}\n\n",
    "{content}<end_of_turn>\n",
    "<start_of_turn>model\n",
)
# Mistral instruct (v0.3 and later): the instruction inside the one [INST] block, before the
# user's text; the server adds <s> itself.
MISTRAL = ChatTemplate("mistral", "[INST] {content}\n\n", "{content}[/INST]", "")
TEMPLATES = {template.name: template for template in (CHATML, GEMMA, LLAMA3, MISTRAL)}

RenderChat = Callable[[ChatMessages], str]


def chat_template(name_or_path: str) -> RenderChat:
    """A named template (chatml, gemma, llama3, mistral) or a Jinja chat template file, such
    as a model's ``chat_template.jinja`` (rendered with ``add_generation_prompt``)."""
    if name_or_path in TEMPLATES:
        return TEMPLATES[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise InvalidInputError(
            f"chat template {name_or_path!r} is neither one of {', '.join(TEMPLATES)} nor a "
            "Jinja template file"
        )
    return JinjaTemplate(path.read_text(encoding="utf-8"), f"jinja:{path.name}")


class JinjaTemplate:
    """A Hugging Face style Jinja chat template (a model's file, or the one a server reports),
    rendered in a sandbox; ``name`` is how judge identities show it."""

    def __init__(self, source: str, name: str) -> None:
        try:
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError:
            raise InvalidInputError(
                "a Jinja chat template needs jinja2: pip install jinja2, or choose a named "
                f"template ({', '.join(TEMPLATES)})"
            ) from None
        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        environment.globals["raise_exception"] = _template_error
        self.__qualname__ = name
        self._template = environment.from_string(source)

    def __call__(self, messages: ChatMessages) -> str:
        """The rendered prompt up to the answer; BOS is left to the server's tokenizer."""
        return self._template.render(
            messages=messages, add_generation_prompt=True, bos_token="", eos_token=""
        )


def _template_error(message: str) -> None:
    """``raise_exception`` as chat templates call it: the template refuses the conversation."""
    raise InvalidInputError(f"the chat template refused the conversation: {message}")


def template_name(template: RenderChat) -> str:
    """A name for the template in judge identities: its own, else the callable's."""
    if isinstance(template, ChatTemplate):
        return template.name
    return str(getattr(template, "__qualname__", type(template).__name__))


def first_token_records(reply: Any, count: int) -> list[Mapping[str, Any]]:
    """Each prompt's first-token record, in prompt order, as the chat API shapes one:
    ``{"token": ..., "top_logprobs": [{"token": ..., "logprob": ...}, ...]}``."""
    choices = reply.get("choices") if isinstance(reply, Mapping) else None
    if not isinstance(choices, list):
        raise JudgeError("the reply has no choices; the server may not be OpenAI-compatible")
    records: dict[int, Mapping[str, Any]] = {}
    for choice in choices:
        index = choice.get("index") if isinstance(choice, Mapping) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
            raise JudgeError(f"the reply holds a choice with an impossible index: {choice!r:.80}")
        if index in records:
            raise JudgeError(f"the reply answers prompt {index} twice")
        records[index] = _completion_record(choice.get("logprobs"))
    missing = [index for index in range(count) if index not in records]
    if missing:
        raise JudgeError(f"the reply answers {count - len(missing)} of {count} prompts")
    return [records[index] for index in range(count)]


def _completion_record(logprobs: object) -> Mapping[str, Any]:
    """A completions choice's first token and alternatives in the chat API's shape."""
    tokens = logprobs.get("tokens") if isinstance(logprobs, Mapping) else None
    tops = logprobs.get("top_logprobs") if isinstance(logprobs, Mapping) else None
    if not (isinstance(tokens, list) and tokens and isinstance(tops, list) and tops):
        raise JudgeError(
            "a completions choice carries no log-probabilities; the server must return "
            "logprobs for /v1/completions (vLLM does)"
        )
    first = tops[0] if isinstance(tops[0], Mapping) else {}
    alternatives = [{"token": token, "logprob": logprob} for token, logprob in first.items()]
    return {"token": tokens[0], "top_logprobs": alternatives}


def check_batch_limits(max_batch_size: int, max_body_bytes: int) -> None:
    """Raise InvalidInputError unless both batch limits are positive integers."""
    for name, value in (("max_batch_size", max_batch_size), ("max_body_bytes", max_body_bytes)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
