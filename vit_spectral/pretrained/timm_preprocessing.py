"""The input each timm checkpoint was trained with: `timm_preprocessing(name)`.

    timm_preprocessing("vit_small_patch14_dinov2")
    # TimmPreprocessing(input_size=(518, 518), mean=(0.485, 0.456, 0.406),
    #                   std=(0.229, 0.224, 0.225), interpolation='bicubic',
    #                   crop_pct=1.0, crop_mode='center')

A table in our code, so that nothing here needs torch or timm: what timm's
`timm.data.resolve_data_config(pretrained_cfg=...)` gives for every
pretrained tag ("arch.tag") of every architecture `pretrained.load_timm`
reads (its own families and the CaiT and Swin converters' names); a bare
architecture name means timm's default tag for it (the first it lists). The
fixture tests/fixtures/pretrained/timm_preprocessing.json holds timm's own
values for each of these names (scripts/make_pretrained_fixtures.py writes it)
and a test compares this table with it.

How timm applies it at evaluation (`timm.data.create_transform`,
`transforms_factory.transforms_imagenet_eval`): crop_mode "center" resizes the
shorter side to input_size / crop_pct with `interpolation`, then takes the
central input_size crop; "squash" resizes the whole image to input_size /
crop_pct (aspect ratio not kept) and center-crops; then (x / 255 - mean) / std
per RGB channel.
"""

from __future__ import annotations

import dataclasses
import difflib

__all__ = ["TimmPreprocessing", "timm_preprocessing", "timm_pretrained_names"]

# Channel statistics by name: (mean, std) of RGB in [0, 1].
_STATS = {
    "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),   # timm IMAGENET_DEFAULT_*
    "inception": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),               # IMAGENET_INCEPTION_*
    "clip": ((0.48145466, 0.4578275, 0.40821073),                  # OPENAI_CLIP_*
             (0.26862954, 0.26130258, 0.27577711)),
}

# "arch.tag" -> (input side, statistics, crop_pct, crop_mode); bicubic for all
# (timm 1.0.31's pretrained cfgs).
_PRETRAINED: dict[str, tuple[int, str, float, str]] = {
    "deit_tiny_patch16_224.fb_in1k": (224, "imagenet", 0.9, "center"),
    "deit_small_patch16_224.fb_in1k": (224, "imagenet", 0.9, "center"),
    "deit_base_patch16_224.fb_in1k": (224, "imagenet", 0.9, "center"),
    "deit_base_patch16_384.fb_in1k": (384, "imagenet", 1.0, "center"),
    "vit_tiny_patch16_224.augreg_in21k": (224, "inception", 0.9, "center"),
    "vit_tiny_patch16_224.augreg_in21k_ft_in1k": (224, "inception", 0.9, "center"),
    "vit_tiny_patch16_384.augreg_in21k_ft_in1k": (384, "inception", 1.0, "center"),
    "vit_small_patch8_224.dino": (224, "imagenet", 0.9, "center"),
    "vit_small_patch16_224.augreg_in1k": (224, "inception", 0.9, "center"),
    "vit_small_patch16_224.augreg_in21k": (224, "inception", 0.9, "center"),
    "vit_small_patch16_224.augreg_in21k_ft_in1k": (224, "inception", 0.9, "center"),
    "vit_small_patch16_224.dino": (224, "imagenet", 0.9, "center"),
    "vit_small_patch16_384.augreg_in1k": (384, "inception", 1.0, "center"),
    "vit_small_patch16_384.augreg_in21k_ft_in1k": (384, "inception", 1.0, "center"),
    "vit_small_patch32_224.augreg_in21k": (224, "inception", 0.9, "center"),
    "vit_small_patch32_224.augreg_in21k_ft_in1k": (224, "inception", 0.9, "center"),
    "vit_small_patch32_384.augreg_in21k_ft_in1k": (384, "inception", 1.0, "center"),
    "vit_base_patch8_224.augreg2_in21k_ft_in1k": (224, "inception", 0.9, "center"),
    "vit_base_patch8_224.augreg_in21k": (224, "inception", 0.9, "center"),
    "vit_base_patch8_224.augreg_in21k_ft_in1k": (224, "inception", 0.9, "center"),
    "vit_base_patch8_224.dino": (224, "imagenet", 0.9, "center"),
    "vit_base_patch16_224.augreg2_in21k_ft_in1k": (224, "inception", 0.9, "center"),
    "vit_base_patch16_224.augreg_in1k": (224, "inception", 0.9, "center"),
    "vit_base_patch16_224.augreg_in21k": (224, "inception", 0.9, "center"),
    "vit_base_patch16_224.augreg_in21k_ft_in1k": (224, "inception", 0.9, "center"),
    "vit_base_patch16_224.bamboo": (224, "clip", 1.0, "center"),
    "vit_base_patch16_224.dino": (224, "imagenet", 0.9, "center"),
    "vit_base_patch16_224.mae": (224, "imagenet", 0.9, "center"),
    "vit_base_patch16_224.orig_in21k": (224, "inception", 0.9, "center"),
    "vit_base_patch16_224.orig_in21k_ft_in1k": (224, "inception", 0.9, "center"),
    "vit_base_patch16_224.sam_in1k": (224, "inception", 0.9, "center"),
    "vit_base_patch16_384.augreg_in1k": (384, "inception", 1.0, "center"),
    "vit_base_patch16_384.augreg_in21k_ft_in1k": (384, "inception", 1.0, "center"),
    "vit_base_patch16_384.orig_in21k_ft_in1k": (384, "inception", 1.0, "center"),
    "vit_base_patch32_224.augreg_in1k": (224, "inception", 0.9, "center"),
    "vit_base_patch32_224.augreg_in21k": (224, "inception", 0.9, "center"),
    "vit_base_patch32_224.augreg_in21k_ft_in1k": (224, "inception", 0.9, "center"),
    "vit_base_patch32_224.orig_in21k": (224, "inception", 0.9, "center"),
    "vit_base_patch32_224.sam_in1k": (224, "inception", 0.9, "center"),
    "vit_base_patch32_384.augreg_in1k": (384, "inception", 1.0, "center"),
    "vit_base_patch32_384.augreg_in21k_ft_in1k": (384, "inception", 1.0, "center"),
    "vit_large_patch16_224.augreg_in21k": (224, "inception", 0.9, "center"),
    "vit_large_patch16_224.augreg_in21k_ft_in1k": (224, "inception", 0.9, "center"),
    "vit_large_patch16_224.mae": (224, "imagenet", 0.9, "center"),
    "vit_large_patch16_224.orig_in21k": (224, "inception", 0.9, "center"),
    "vit_large_patch16_384.augreg_in21k_ft_in1k": (384, "inception", 1.0, "center"),
    "vit_large_patch32_224.orig_in21k": (224, "inception", 0.9, "center"),
    "vit_large_patch32_384.orig_in21k_ft_in1k": (384, "inception", 1.0, "center"),
    "vit_huge_patch14_224.mae": (224, "imagenet", 0.9, "center"),
    "vit_huge_patch14_224.orig_in21k": (224, "inception", 0.9, "center"),
    "deit3_small_patch16_224.fb_in1k": (224, "imagenet", 0.9, "center"),
    "deit3_small_patch16_224.fb_in22k_ft_in1k": (224, "imagenet", 1.0, "center"),
    "deit3_small_patch16_384.fb_in1k": (384, "imagenet", 1.0, "center"),
    "deit3_small_patch16_384.fb_in22k_ft_in1k": (384, "imagenet", 1.0, "center"),
    "deit3_medium_patch16_224.fb_in1k": (224, "imagenet", 0.9, "center"),
    "deit3_medium_patch16_224.fb_in22k_ft_in1k": (224, "imagenet", 1.0, "center"),
    "deit3_base_patch16_224.fb_in1k": (224, "imagenet", 0.9, "center"),
    "deit3_base_patch16_224.fb_in22k_ft_in1k": (224, "imagenet", 1.0, "center"),
    "deit3_base_patch16_384.fb_in1k": (384, "imagenet", 1.0, "center"),
    "deit3_base_patch16_384.fb_in22k_ft_in1k": (384, "imagenet", 1.0, "center"),
    "deit3_large_patch16_224.fb_in1k": (224, "imagenet", 0.9, "center"),
    "deit3_large_patch16_224.fb_in22k_ft_in1k": (224, "imagenet", 1.0, "center"),
    "deit3_large_patch16_384.fb_in1k": (384, "imagenet", 1.0, "center"),
    "deit3_large_patch16_384.fb_in22k_ft_in1k": (384, "imagenet", 1.0, "center"),
    "deit3_huge_patch14_224.fb_in1k": (224, "imagenet", 0.9, "center"),
    "deit3_huge_patch14_224.fb_in22k_ft_in1k": (224, "imagenet", 1.0, "center"),
    "deit_tiny_distilled_patch16_224.fb_in1k": (224, "imagenet", 0.9, "center"),
    "deit_small_distilled_patch16_224.fb_in1k": (224, "imagenet", 0.9, "center"),
    "deit_base_distilled_patch16_224.fb_in1k": (224, "imagenet", 0.9, "center"),
    "deit_base_distilled_patch16_384.fb_in1k": (384, "imagenet", 1.0, "center"),
    "vit_small_patch14_dinov2.lvd142m": (518, "imagenet", 1.0, "center"),
    "vit_base_patch14_dinov2.lvd142m": (518, "imagenet", 1.0, "center"),
    "vit_large_patch14_dinov2.lvd142m": (518, "imagenet", 1.0, "center"),
    "vit_giant_patch14_dinov2.lvd142m": (518, "imagenet", 1.0, "center"),
    "vit_small_patch14_reg4_dinov2.lvd142m": (518, "imagenet", 1.0, "center"),
    "vit_base_patch14_reg4_dinov2.lvd142m": (518, "imagenet", 1.0, "center"),
    "vit_large_patch14_reg4_dinov2.lvd142m": (518, "imagenet", 1.0, "center"),
    "vit_giant_patch14_reg4_dinov2.lvd142m": (518, "imagenet", 1.0, "center"),
    "vit_xsmall_patch16_clip_224.tinyclip_yfcc15m": (224, "clip", 0.9, "center"),
    "vit_medium_patch16_clip_224.tinyclip_yfcc15m": (224, "clip", 0.9, "center"),
    "vit_medium_patch32_clip_224.tinyclip_laion400m": (224, "clip", 0.9, "center"),
    "vit_betwixt_patch32_clip_224.tinyclip_laion400m": (224, "clip", 0.9, "center"),
    "vit_base_patch32_clip_224.datacompxl": (224, "clip", 1.0, "center"),
    "vit_base_patch32_clip_224.laion2b": (224, "clip", 0.9, "center"),
    "vit_base_patch32_clip_224.laion2b_ft_in1k": (224, "clip", 0.9, "center"),
    "vit_base_patch32_clip_224.laion2b_ft_in12k_in1k": (224, "clip", 0.9, "center"),
    "vit_base_patch32_clip_224.laion400m_e32": (224, "clip", 0.9, "center"),
    "vit_base_patch32_clip_224.metaclip_2pt5b": (224, "clip", 1.0, "center"),
    "vit_base_patch32_clip_224.metaclip_400m": (224, "clip", 1.0, "center"),
    "vit_base_patch32_clip_224.openai": (224, "clip", 0.9, "center"),
    "vit_base_patch32_clip_224.openai_ft_in1k": (224, "clip", 0.9, "center"),
    "vit_base_patch32_clip_256.datacompxl": (256, "clip", 1.0, "center"),
    "vit_base_patch32_clip_384.laion2b_ft_in12k_in1k": (384, "clip", 1.0, "center"),
    "vit_base_patch32_clip_384.openai_ft_in12k_in1k": (384, "clip", 0.95, "squash"),
    "vit_base_patch32_clip_448.laion2b_ft_in12k_in1k": (448, "clip", 1.0, "center"),
    "vit_base_patch32_clip_quickgelu_224.laion400m_e32": (224, "clip", 0.9, "center"),
    "vit_base_patch32_clip_quickgelu_224.metaclip_2pt5b": (224, "clip", 1.0, "center"),
    "vit_base_patch32_clip_quickgelu_224.metaclip_400m": (224, "clip", 1.0, "center"),
    "vit_base_patch32_clip_quickgelu_224.openai": (224, "clip", 0.9, "center"),
    "vit_base_patch16_clip_224.datacompxl": (224, "clip", 1.0, "center"),
    "vit_base_patch16_clip_224.dfn2b": (224, "clip", 1.0, "center"),
    "vit_base_patch16_clip_224.laion2b": (224, "clip", 1.0, "center"),
    "vit_base_patch16_clip_224.laion2b_ft_in1k": (224, "clip", 1.0, "center"),
    "vit_base_patch16_clip_224.laion2b_ft_in12k": (224, "clip", 0.9, "center"),
    "vit_base_patch16_clip_224.laion2b_ft_in12k_in1k": (224, "clip", 0.95, "center"),
    "vit_base_patch16_clip_224.laion400m_e32": (224, "clip", 1.0, "center"),
    "vit_base_patch16_clip_224.metaclip_2pt5b": (224, "clip", 1.0, "center"),
    "vit_base_patch16_clip_224.metaclip_400m": (224, "clip", 1.0, "center"),
    "vit_base_patch16_clip_224.openai": (224, "clip", 0.9, "center"),
    "vit_base_patch16_clip_224.openai_ft_in1k": (224, "clip", 0.9, "center"),
    "vit_base_patch16_clip_224.openai_ft_in12k": (224, "clip", 0.9, "center"),
    "vit_base_patch16_clip_224.openai_ft_in12k_in1k": (224, "clip", 0.95, "center"),
    "vit_base_patch16_clip_384.laion2b_ft_in1k": (384, "clip", 1.0, "squash"),
    "vit_base_patch16_clip_384.laion2b_ft_in12k_in1k": (384, "clip", 1.0, "squash"),
    "vit_base_patch16_clip_384.openai_ft_in1k": (384, "clip", 1.0, "squash"),
    "vit_base_patch16_clip_384.openai_ft_in12k_in1k": (384, "clip", 0.95, "squash"),
    "vit_base_patch16_clip_quickgelu_224.metaclip_2pt5b": (224, "clip", 1.0, "center"),
    "vit_base_patch16_clip_quickgelu_224.metaclip_400m": (224, "clip", 1.0, "center"),
    "vit_base_patch16_clip_quickgelu_224.openai": (224, "clip", 0.9, "center"),
    "vit_base_patch16_plus_clip_240.laion400m_e32": (240, "clip", 1.0, "center"),
    "vit_large_patch14_clip_224.apple_mclip2_dfndr2b": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_224.datacompxl": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_224.dfn2b": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_224.dfn2b_s39b": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_224.laion2b": (224, "inception", 1.0, "center"),
    "vit_large_patch14_clip_224.laion2b_ft_in1k": (224, "inception", 1.0, "center"),
    "vit_large_patch14_clip_224.laion2b_ft_in12k": (224, "inception", 1.0, "center"),
    "vit_large_patch14_clip_224.laion2b_ft_in12k_in1k": (224, "inception", 1.0, "center"),
    "vit_large_patch14_clip_224.laion400m_e32": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_224.metaclip_2pt5b": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_224.metaclip_400m": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_224.openai": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_224.openai_ft_in1k": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_224.openai_ft_in12k": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_224.openai_ft_in12k_in1k": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_336.laion2b_ft_in1k": (336, "inception", 1.0, "squash"),
    "vit_large_patch14_clip_336.laion2b_ft_in12k_in1k": (336, "inception", 1.0, "squash"),
    "vit_large_patch14_clip_336.openai": (336, "clip", 1.0, "center"),
    "vit_large_patch14_clip_336.openai_ft_in12k_in1k": (336, "clip", 1.0, "squash"),
    "vit_large_patch14_clip_quickgelu_224.dfn2b": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_quickgelu_224.metaclip_2pt5b": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_quickgelu_224.metaclip_400m": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_quickgelu_224.openai": (224, "clip", 1.0, "center"),
    "vit_large_patch14_clip_quickgelu_336.openai": (336, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_224.dfn5b": (224, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_224.laion2b": (224, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_224.laion2b_ft_in1k": (224, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_224.laion2b_ft_in12k": (224, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_224.laion2b_ft_in12k_in1k": (224, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_224.metaclip2_worldwide": (224, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_224.metaclip_2pt5b": (224, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_224.metaclip_altogether": (224, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_336.laion2b_ft_in12k_in1k": (336, "clip", 1.0, "squash"),
    "vit_huge_patch14_clip_378.dfn5b": (378, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_378.metaclip2_worldwide": (378, "clip", 1.0, "squash"),
    "vit_huge_patch14_clip_quickgelu_224.dfn5b": (224, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_quickgelu_224.metaclip2_worldwide": (224, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_quickgelu_224.metaclip_2pt5b": (224, "clip", 1.0, "center"),
    "vit_huge_patch14_clip_quickgelu_378.dfn5b": (378, "clip", 1.0, "center"),
    "vit_giant_patch14_clip_224.laion2b": (224, "clip", 1.0, "center"),
    "vit_gigantic_patch14_clip_224.laion2b": (224, "clip", 1.0, "center"),
    "vit_gigantic_patch14_clip_224.metaclip2_worldwide": (224, "clip", 1.0, "center"),
    "vit_gigantic_patch14_clip_224.metaclip_2pt5b": (224, "clip", 1.0, "center"),
    "vit_gigantic_patch14_clip_378.metaclip2_worldwide": (378, "clip", 1.0, "squash"),
    "vit_gigantic_patch14_clip_quickgelu_224.metaclip_2pt5b": (224, "clip", 1.0, "center"),
    "cait_xxs24_224.fb_dist_in1k": (224, "imagenet", 1.0, "center"),
    "cait_xxs24_384.fb_dist_in1k": (384, "imagenet", 1.0, "center"),
    "cait_s24_224.fb_dist_in1k": (224, "imagenet", 1.0, "center"),
    "cait_s24_384.fb_dist_in1k": (384, "imagenet", 1.0, "center"),
    "swin_tiny_patch4_window7_224.ms_in1k": (224, "imagenet", 0.9, "center"),
    "swin_tiny_patch4_window7_224.ms_in22k": (224, "imagenet", 0.9, "center"),
    "swin_tiny_patch4_window7_224.ms_in22k_ft_in1k": (224, "imagenet", 0.9, "center"),
    "swin_small_patch4_window7_224.ms_in1k": (224, "imagenet", 0.9, "center"),
    "swin_small_patch4_window7_224.ms_in22k": (224, "imagenet", 0.9, "center"),
    "swin_small_patch4_window7_224.ms_in22k_ft_in1k": (224, "imagenet", 0.9, "center"),
    "swin_base_patch4_window7_224.ms_in1k": (224, "imagenet", 0.9, "center"),
    "swin_base_patch4_window7_224.ms_in22k": (224, "imagenet", 0.9, "center"),
    "swin_base_patch4_window7_224.ms_in22k_ft_in1k": (224, "imagenet", 0.9, "center"),
    "swin_base_patch4_window12_384.ms_in1k": (384, "imagenet", 1.0, "center"),
    "swin_base_patch4_window12_384.ms_in22k": (384, "imagenet", 1.0, "center"),
    "swin_base_patch4_window12_384.ms_in22k_ft_in1k": (384, "imagenet", 1.0, "center"),
}

# A bare architecture name -> timm's default pretrained tag.
_DEFAULT_TAG: dict[str, str] = {
    "deit_tiny_patch16_224": "fb_in1k",
    "deit_small_patch16_224": "fb_in1k",
    "deit_base_patch16_224": "fb_in1k",
    "deit_base_patch16_384": "fb_in1k",
    "vit_tiny_patch16_224": "augreg_in21k_ft_in1k",
    "vit_tiny_patch16_384": "augreg_in21k_ft_in1k",
    "vit_small_patch8_224": "dino",
    "vit_small_patch16_224": "augreg_in21k_ft_in1k",
    "vit_small_patch16_384": "augreg_in21k_ft_in1k",
    "vit_small_patch32_224": "augreg_in21k_ft_in1k",
    "vit_small_patch32_384": "augreg_in21k_ft_in1k",
    "vit_base_patch8_224": "augreg2_in21k_ft_in1k",
    "vit_base_patch16_224": "augreg2_in21k_ft_in1k",
    "vit_base_patch16_384": "augreg_in21k_ft_in1k",
    "vit_base_patch32_224": "augreg_in21k_ft_in1k",
    "vit_base_patch32_384": "augreg_in21k_ft_in1k",
    "vit_large_patch16_224": "augreg_in21k_ft_in1k",
    "vit_large_patch16_384": "augreg_in21k_ft_in1k",
    "vit_large_patch32_224": "orig_in21k",
    "vit_large_patch32_384": "orig_in21k_ft_in1k",
    "vit_huge_patch14_224": "orig_in21k",
    "deit3_small_patch16_224": "fb_in1k",
    "deit3_small_patch16_384": "fb_in1k",
    "deit3_medium_patch16_224": "fb_in1k",
    "deit3_base_patch16_224": "fb_in1k",
    "deit3_base_patch16_384": "fb_in1k",
    "deit3_large_patch16_224": "fb_in1k",
    "deit3_large_patch16_384": "fb_in1k",
    "deit3_huge_patch14_224": "fb_in1k",
    "deit_tiny_distilled_patch16_224": "fb_in1k",
    "deit_small_distilled_patch16_224": "fb_in1k",
    "deit_base_distilled_patch16_224": "fb_in1k",
    "deit_base_distilled_patch16_384": "fb_in1k",
    "vit_small_patch14_dinov2": "lvd142m",
    "vit_base_patch14_dinov2": "lvd142m",
    "vit_large_patch14_dinov2": "lvd142m",
    "vit_giant_patch14_dinov2": "lvd142m",
    "vit_small_patch14_reg4_dinov2": "lvd142m",
    "vit_base_patch14_reg4_dinov2": "lvd142m",
    "vit_large_patch14_reg4_dinov2": "lvd142m",
    "vit_giant_patch14_reg4_dinov2": "lvd142m",
    "vit_xsmall_patch16_clip_224": "tinyclip_yfcc15m",
    "vit_medium_patch16_clip_224": "tinyclip_yfcc15m",
    "vit_medium_patch32_clip_224": "tinyclip_laion400m",
    "vit_betwixt_patch32_clip_224": "tinyclip_laion400m",
    "vit_base_patch32_clip_224": "laion2b_ft_in12k_in1k",
    "vit_base_patch32_clip_256": "datacompxl",
    "vit_base_patch32_clip_384": "laion2b_ft_in12k_in1k",
    "vit_base_patch32_clip_448": "laion2b_ft_in12k_in1k",
    "vit_base_patch32_clip_quickgelu_224": "laion400m_e32",
    "vit_base_patch16_clip_224": "laion2b_ft_in12k_in1k",
    "vit_base_patch16_clip_384": "laion2b_ft_in12k_in1k",
    "vit_base_patch16_clip_quickgelu_224": "metaclip_2pt5b",
    "vit_base_patch16_plus_clip_240": "laion400m_e32",
    "vit_large_patch14_clip_224": "laion2b_ft_in12k_in1k",
    "vit_large_patch14_clip_336": "laion2b_ft_in12k_in1k",
    "vit_large_patch14_clip_quickgelu_224": "dfn2b",
    "vit_large_patch14_clip_quickgelu_336": "openai",
    "vit_huge_patch14_clip_224": "laion2b_ft_in12k_in1k",
    "vit_huge_patch14_clip_336": "laion2b_ft_in12k_in1k",
    "vit_huge_patch14_clip_378": "dfn5b",
    "vit_huge_patch14_clip_quickgelu_224": "dfn5b",
    "vit_huge_patch14_clip_quickgelu_378": "dfn5b",
    "vit_giant_patch14_clip_224": "laion2b",
    "vit_gigantic_patch14_clip_224": "laion2b",
    "vit_gigantic_patch14_clip_378": "metaclip2_worldwide",
    "vit_gigantic_patch14_clip_quickgelu_224": "metaclip_2pt5b",
    "cait_xxs24_224": "fb_dist_in1k",
    "cait_xxs24_384": "fb_dist_in1k",
    "cait_s24_224": "fb_dist_in1k",
    "cait_s24_384": "fb_dist_in1k",
    "swin_tiny_patch4_window7_224": "ms_in1k",
    "swin_small_patch4_window7_224": "ms_in22k_ft_in1k",
    "swin_base_patch4_window7_224": "ms_in22k_ft_in1k",
    "swin_base_patch4_window12_384": "ms_in22k_ft_in1k",
}


@dataclasses.dataclass(frozen=True)
class TimmPreprocessing:
  """How timm prepares an image for a pretrained model at evaluation.

  Attributes:
    input_size: (H, W) of the model's input.
    mean, std: per RGB channel, of images scaled to [0, 1].
    interpolation: the resize's interpolation ("bicubic" for every name here).
    crop_pct: the crop's share of the resized image (input_size / crop_pct
      is the resize target).
    crop_mode: "center" (shorter side resized, then a central crop) or
      "squash" (both sides resized, then a central crop).
  """
  input_size: tuple[int, int]
  mean: tuple[float, float, float]
  std: tuple[float, float, float]
  interpolation: str
  crop_pct: float
  crop_mode: str


def timm_pretrained_names() -> tuple[str, ...]:
  """Every name the table knows: each "arch.tag" and each bare arch."""
  return tuple(_PRETRAINED) + tuple(_DEFAULT_TAG)


def timm_preprocessing(name: str) -> TimmPreprocessing:
  """The preprocessing timm's pretrained cfg gives `name` ("arch" or "arch.tag").

  Raises:
    ValueError: an unknown name, naming the nearest known one.
  """
  full = f"{name}.{_DEFAULT_TAG[name]}" if name in _DEFAULT_TAG else name
  if full not in _PRETRAINED:
    close = difflib.get_close_matches(name, timm_pretrained_names(), n=1, cutoff=0.0)
    hint = f"; the nearest known name is {close[0]!r}" if close else ""
    raise ValueError(f"timm_preprocessing: no timm pretrained weights named {name!r} among "
                     f"the families load_timm reads{hint}")
  side, stats, crop_pct, crop_mode = _PRETRAINED[full]
  mean, std = _STATS[stats]
  return TimmPreprocessing((side, side), mean, std, "bicubic", crop_pct, crop_mode)
