"""Registered model names: "<size>/<patch>", e.g. "Ti/16", "S/16", "B/16", "L/16".

Sizes follow ViT (Dosovitskiy et al., 2021) and DeiT (Touvron et al., 2021):

| size | width | depth | heads | MLP |
| ---- | ----- | ----- | ----- | ---- |
| Ti   | 192   | 12    | 3     | 768  |
| S    | 384   | 12    | 6     | 1536 |
| B    | 768   | 12    | 12    | 3072 |
| L    | 1024  | 24    | 16    | 4096 |

Patch sizes 16 and 32 are for ImageNet-sized inputs; 2, 4 and 8 for CIFAR (32²)
and digits (8²).

The hierarchical and class-attention backbones the papers also report on have
names of their own: each family module (`vit_spectral.models.<family>`)
registers its names beside its model class (`models.backbone.register_models`,
`registered_model_names()` lists every name); `models.build` resolves them.
"""

from __future__ import annotations

SIZES: dict[str, dict[str, int]] = {
    "Ti": dict(hidden_size=192, depth=12, num_heads=3, mlp_dim=768),
    "S": dict(hidden_size=384, depth=12, num_heads=6, mlp_dim=1536),
    "B": dict(hidden_size=768, depth=12, num_heads=12, mlp_dim=3072),
    "L": dict(hidden_size=1024, depth=24, num_heads=16, mlp_dim=4096),
}
PATCH_SIZES = (2, 4, 8, 16, 32)
MODEL_NAMES = tuple(f"{s}/{p}" for s in SIZES for p in PATCH_SIZES)


def variant_fields(name: str) -> dict[str, int]:
  """"S/16" -> dict(hidden_size=384, depth=12, num_heads=6, mlp_dim=1536, patch_size=16)."""
  if name not in MODEL_NAMES:
    raise ValueError(f"model.variant={name!r} is not a registered ViT name; "
                     f"choose one of {list(MODEL_NAMES)}")
  size, patch = name.split("/")
  return dict(SIZES[size], patch_size=int(patch))
