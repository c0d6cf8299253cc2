"""Data sets and tf.data input pipelines for image classification; a run's eval
images for analysis (`eval_images(config.input, num_images=64)`).

Names are imported from their modules on first use (`lazy_exports`), so
`import vit_spectral.data` imports no TensorFlow. Importing
`data.input_pipeline` (which every pipeline function lives in) registers the
offline `digits` and `digits_parity` TFDS builders. `config.input`'s settings
(`InputSettings`, `input_settings`) are `vit_spectral.sections.input`'s.
"""

from vit_spectral import lazy_exports
# TensorFlow-free, imported now.
from vit_spectral.data.statistics import (  # noqa: F401
    DATASET_STATISTICS, Normalization, dataset_statistics)

_EXPORTS = {
    "Digits": "digits",
    "DigitsParity": "digits",
    "SHIPPED_DATASETS": "input_pipeline",
    "DatasetMeta": "input_pipeline",
    "DatasetNotPreparedError": "input_pipeline",
    "EVAL_RESIZES": "vit_spectral.sections.input",
    "InputSettings": "vit_spectral.sections.input",
    "TRAIN_AUGMENTS": "vit_spectral.sections.input",
    "StreamStart": "input_pipeline",
    "create_eval_dataset": "input_pipeline",
    "create_train_dataset": "input_pipeline",
    "dataset_meta": "input_pipeline",
    "eval_images": "analysis_images",
    "get_builder": "input_pipeline",
    "input_settings": "vit_spectral.sections.input",
    "planned_meta": "input_pipeline",
    "stream_start": "input_pipeline",
    "stream_start_at": "input_pipeline",
    "train_split": "input_pipeline",
}
__all__ = sorted([*_EXPORTS, "DATASET_STATISTICS", "Normalization", "dataset_statistics"])
__getattr__, __dir__ = lazy_exports.exports(__name__, _EXPORTS)
