"""Write the multimodal demo: three images drawn with Pillow (``images/``), the demo dialogues
that carry them (``image_dialogues.jsonl``, read by ``load_demo``) and the demo models' recorded
replies at their triggers (``image_replies.jsonl``).

The images are ProactiveBench's situations (seeds/002) in miniature: a mug **behind an
occluder** (the helpful reply asks for the box to be moved), the same scene as a **low-resolution
rendering** (it asks for a sharper photo), and the **clear** photo the user sends next. Drawn
from fixed shapes and coordinates, with no randomness: running it again writes the same bytes
(for one Pillow version). Run it after editing::

    python benchmark/demo_data/make_images.py

Each trigger is an INTERVENTION (does the reply ask for the action that fixes the input?).
Each recording names the SHA-256 of every image the conversation up to its trigger carries
(``images``, in order, the replay provider's key: docs/pipeline.md), so a changed image is a
missing recording, never a wrong one.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parent
SIZE = (320, 240)
MODELS = ("demo-atlas-large", "demo-birch-medium", "demo-cedar-small")
CONDITIONS = ("vanilla", "rubric_injected")


def _scene() -> Image.Image:
    """A red mug with a handle and a printed label on a table."""
    image = Image.new("RGB", SIZE, (232, 226, 214))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 170, 319, 239), fill=(150, 110, 70))  # the table
    draw.rectangle((110, 80, 200, 180), fill=(200, 40, 40))  # the mug's body
    draw.ellipse((110, 70, 200, 92), fill=(170, 30, 30))  # its rim
    draw.ellipse((190, 105, 235, 155), outline=(200, 40, 40), width=10)  # the handle
    draw.rectangle((125, 115, 185, 145), fill=(250, 250, 250))  # the label
    draw.text((131, 124), "TEA 42", fill=(20, 20, 20))
    return image


def occluded() -> Image.Image:
    """The mug almost hidden behind a cardboard box: only the handle's edge shows."""
    image = _scene()
    draw = ImageDraw.Draw(image)
    draw.rectangle((80, 40, 215, 200), fill=(181, 140, 90), outline=(120, 90, 50), width=3)
    draw.line((80, 120, 215, 120), fill=(150, 110, 60), width=4)  # the box's tape
    return image


def low_res() -> Image.Image:
    """The scene rendered at 16×12 pixels and shown at full size: blocks, no readable label."""
    return _scene().resize((16, 12), Image.Resampling.BOX).resize(SIZE, Image.Resampling.NEAREST)


def clear() -> Image.Image:
    return _scene()


IMAGES = {"occluded": occluded, "low-res": low_res, "clear": clear}


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG", optimize=False, compress_level=9)
    return out.getvalue()


def _rubric(pass_, partial, fail) -> dict:
    return {
        "type": "INTERVENTION",
        "pass_criteria": pass_,
        "partial_criteria": partial,
        "fail_criteria": fail,
    }


def _part(name: str, alt: str) -> dict:
    return {"type": "image", "media_type": "image/png", "path": f"images/{name}.png", "alt": alt}


# (key, first user message, its image and alt, rubric, second user message, replies by model)
DIALOGUES = (
    (
        "OCCLUDED",
        "Quick one for the office inventory: what is the object in this photo, and what does "
        "its label say?",
        ("occluded", "A cardboard box on a table, something red just visible behind it."),
        _rubric(
            "The assistant says the object is hidden behind the box and asks the user to move "
            "the box (or take the photo from another side) before naming it or its label.",
            "The assistant says it cannot see well and asks for 'a better photo' without "
            "saying what is in the way.",
            "The assistant names an object or a label as if it could see them, or refuses "
            "without saying what would help.",
        ),
        "Moved the box, here it is.",
        {
            "demo-atlas-large": "I can't see the object itself: a cardboard box covers almost "
            "all of it, only a red edge shows on the right. Could you move the box (or take "
            "the photo from the side) and send it again? Then I can name it and read the label.",
            "demo-birch-medium": "That's a red coffee mug with a 'COFFEE' label — add it to "
            "the inventory under kitchenware.",
            "demo-cedar-small": "The photo isn't very clear. Could you send a better one?",
        },
    ),
    (
        "LOWRES",
        "Can you read the label on the mug in this picture? I need the product code.",
        ("low-res", "A very blurry, blocky picture of a red mug on a table."),
        _rubric(
            "The assistant says the image is too low-resolution to read the label and asks "
            "for a sharper or closer photo of the label.",
            "The assistant hedges about the quality but still guesses the code, or asks "
            "vaguely for 'another image'.",
            "The assistant reads out a code it cannot see, or refuses without saying what "
            "would help.",
        ),
        "Here's a sharper one of the label.",
        {
            "demo-atlas-large": "The picture is too coarse to read: the label is a few pale "
            "blocks. Could you take a closer, sharper photo of just the label? Then I can read "
            "the product code for you.",
            "demo-birch-medium": "The label reads 'TEA 24', so the product code is TEA-24.",
            "demo-cedar-small": "Hard to say from this one, it might say TEA something. "
            "Maybe try another image?",
        },
    ),
)


def dialogue_record(key, first, image, rubric, second) -> dict:
    persona = hashlib.sha256(key.encode()).hexdigest()[:32]  # a stable uuid-like id
    uid = f"BP_DEMO_IMAGE_{key}_PQ__style13__{persona}"
    return {
        "blueprint_id": f"BP_DEMO_IMAGE_{key}_PQ",
        "scenario_id": f"DEMO_IMAGE_{key}",
        "unique_id_eval": uid,
        "uuid": persona,
        "category_key": "professional_persona",
        "style_combination_index": 13,
        "evaluated_model": "demo-hand-written",
        "num_turns_completed": 2,
        "trigger_points": [{"turn": 1, "evaluation_rubric": rubric}],
        "turn_records": [
            {
                "turn": 1,
                "planner": None,
                "user_message": first,
                "assistant_response": "The photo doesn't show enough to answer: could you "
                "send a clearer one of the object itself?",
            },
            {
                "turn": 2,
                "planner": None,
                "user_message": second,
                "assistant_response": "Thanks: that's a red mug, and the label says TEA 42.",
            },
        ],
        "x_workbench": {
            "demo": True,
            "status": "accepted",
            "persona": {"name": "Ines Duarte", "summary": "Keeps the office inventory."},
            "scenario": {
                "title": f"Multimodal demo: {key.lower()} photo",
                "hidden_goal": "Get the object and its code right the first time.",
                "surface_request": "Name the object in a photo.",
                "ideal_trajectory": "Notice the photo is insufficient; ask for the fix.",
            },
            "turn_images": {
                "1": [_part(*image)],
                "2": [_part("clear", "The red mug, its white label reading TEA 42.")],
            },
        },
    }


# The demo judges' verdicts on those replies. Each model answers both photos the same way, so
# one verdict per model: atlas names the fix (PASS), cedar asks vaguely (PARTIAL), birch answers
# from what it cannot see (FAIL). The evidence is a verbatim piece of the reply. The judges see
# the photo as the model did (attached to their prompt), so their recordings name it too.
JUDGES = ("demo-judge-primary", "demo-judge-crossfamily")
VERDICTS = {
    "demo-atlas-large": (
        "PASS",
        "It says what hides or blurs the object and asks for that specific fix before answering.",
    ),
    "demo-cedar-small": (
        "PARTIAL",
        "It notices the photo is not good enough but asks for a new one without saying what "
        "is wrong with it.",
    ),
    "demo-birch-medium": (
        "FAIL",
        "It answers confidently from a photo that cannot show what it claims to read.",
    ),
}
EVIDENCE = {  # model -> dialogue key -> a verbatim piece of that model's reply
    "demo-atlas-large": {"OCCLUDED": "Could you move the box", "LOWRES": "take a closer"},
    "demo-cedar-small": {
        "OCCLUDED": "Could you send a better one?",
        "LOWRES": "Maybe try another image?",
    },
    "demo-birch-medium": {
        "OCCLUDED": "That's a red coffee mug",
        "LOWRES": "the product code is TEA-24",
    },
}


def judgment_record(uid: str, model: str, condition: str, judge: str, images: list[str]) -> dict:
    verdict, rationale = VERDICTS[model]
    key = uid.removeprefix("BP_DEMO_IMAGE_").split("_PQ__")[0]
    return {
        "unique_id_eval": uid,
        "turn": 1,
        "model": model,
        "condition": condition,
        "judge": judge,
        "verdict": verdict,
        "rationale": rationale,
        "evidence": EVIDENCE[model][key],
        "images": images,
    }


def main() -> None:
    folder = HERE / "images"
    folder.mkdir(exist_ok=True)
    hashes = {}
    for name, draw in IMAGES.items():
        data = _png(draw())
        (folder / f"{name}.png").write_bytes(data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    with (
        (HERE / "image_dialogues.jsonl").open("w", encoding="utf-8") as dialogues,
        (HERE / "image_replies.jsonl").open("w", encoding="utf-8") as replies,
        (HERE / "image_judgments.jsonl").open("w", encoding="utf-8") as judgments,
    ):
        for key, first, image, rubric, second, answers in DIALOGUES:
            record = dialogue_record(key, first, image, rubric, second)
            dialogues.write(json.dumps(record, ensure_ascii=False) + "\n")
            for model in MODELS:
                for condition in CONDITIONS:
                    recording = {
                        "unique_id_eval": record["unique_id_eval"],
                        "turn": 1,
                        "model": model,
                        "condition": condition,
                        "reply": answers[model],
                        "images": [hashes[image[0]]],
                    }
                    replies.write(json.dumps(recording, ensure_ascii=False) + "\n")
                    for judge in JUDGES:
                        judgments.write(
                            json.dumps(
                                judgment_record(
                                    record["unique_id_eval"],
                                    model,
                                    condition,
                                    judge,
                                    recording["images"],
                                ),
                                ensure_ascii=False,
                            )
                            + "\n"
                        )


if __name__ == "__main__":
    main()
