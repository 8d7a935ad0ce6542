"""A cell's images in its tool result: the model sees them, if it can, within per-cell limits.

A model whose pydantic-ai profile accepts images (`supports_image_input`) gets each saved PNG
as image content of the `execute_ipython_cell` result (pydantic-ai sends it in the provider's
tool-result channel, or beside it where the protocol has none), up to `max_images_to_model`
per cell and `max_image_bytes` each. The text keeps every image's saved path, and says which
images were left out and why. A text-only model gets the text alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["accepts_images", "with_images"]


def accepts_images(model: Any) -> bool:
    """Whether the model takes images as input, by its pydantic-ai profile."""
    try:
        profile = model.profile
    except Exception:  # a model without a profile: assume text only
        return False
    return bool(profile.get("supports_image_input", False)) if isinstance(profile, dict) else False


def with_images(text: str, images: list[Path] | tuple[Path, ...], *, max_images: int, max_bytes: int) -> Any:
    """The tool-result content of a cell: `text` alone, or `[text, image, …]` with the images that fit."""
    from pydantic_ai.messages import BinaryContent

    attached: list[BinaryContent] = []
    notes: list[str] = []
    for path in images:
        if len(attached) >= max_images:
            notes.append(f"[image not shown to you (at most {max_images} per cell): {path}]")
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            notes.append(f"[image not shown to you (could not be read: {exc.strerror}): {path}]")
            continue
        if len(data) > max_bytes:
            notes.append(f"[image not shown to you ({len(data):,} bytes, over {max_bytes:,}): {path}]")
            continue
        attached.append(BinaryContent(data=data, media_type="image/png", identifier=path.stem))
    if notes:
        text = text.rstrip("\n") + "\n" + "\n".join(notes) + "\n"
    if not attached:
        return text
    count = "the image" if len(attached) == 1 else f"{len(attached)} images"
    return [f"{text.rstrip()}\n[{count} attached below, in the order saved]", *attached]
