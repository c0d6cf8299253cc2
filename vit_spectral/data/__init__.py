"""Data sets and tf.data input pipelines for image classification.

Importing this package registers the offline `digits` and `digits_parity`
TFDS builders.
"""

from vit_spectral.data.digits import Digits, DigitsParity
from vit_spectral.data.input_pipeline import (
    SHIPPED_DATASETS,
    DatasetMeta,
    DatasetNotPreparedError,
    StreamStart,
    create_eval_dataset,
    create_train_dataset,
    dataset_meta,
    get_builder,
    planned_meta,
    stream_start,
    stream_start_at,
    train_split,
)
from vit_spectral.data.statistics import (
    DATASET_STATISTICS,
    Normalization,
    dataset_statistics,
)
from vit_spectral.data.input_settings import (
    EVAL_RESIZES,
    TRAIN_AUGMENTS,
    InputSettings,
    input_settings,
)

__all__ = [
    "DATASET_STATISTICS",
    "Digits",
    "DigitsParity",
    "DatasetMeta",
    "DatasetNotPreparedError",
    "EVAL_RESIZES",
    "InputSettings",
    "Normalization",
    "SHIPPED_DATASETS",
    "StreamStart",
    "TRAIN_AUGMENTS",
    "create_eval_dataset",
    "create_train_dataset",
    "dataset_meta",
    "dataset_statistics",
    "get_builder",
    "input_settings",
    "planned_meta",
    "stream_start",
    "stream_start_at",
    "train_split",
]
