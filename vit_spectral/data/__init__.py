"""Data sets and tf.data input pipelines for image classification.

Importing this package registers the offline `digits` TFDS builder.
"""

from vit_spectral.data.digits import Digits
from vit_spectral.data.input_pipeline import (
    EVAL_RESIZES,
    SHIPPED_DATASETS,
    TRAIN_AUGMENTS,
    DatasetMeta,
    DatasetNotPreparedError,
    create_eval_dataset,
    create_train_dataset,
    dataset_meta,
    get_builder,
)

__all__ = [
    "Digits",
    "DatasetMeta",
    "DatasetNotPreparedError",
    "EVAL_RESIZES",
    "SHIPPED_DATASETS",
    "TRAIN_AUGMENTS",
    "create_eval_dataset",
    "create_train_dataset",
    "dataset_meta",
    "get_builder",
]
