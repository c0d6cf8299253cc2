"""Layers are numbered from 0 everywhere (as the trainer's `layer_00` scalars):
the tidy frame's and per_layer's "layer", the curves' x values and the
spectrum plot's legend name the same layers."""

import numpy as np

from vit_spectral.analysis import Diagnosis, plot_diagnoses, plot_spectra


def _diagnosis(num_layers=5, stages=(0, 0, 0, 1, 1)):
  rng = np.random.default_rng(0)
  layers = tuple({"hc_dc_ratio": float(rng.uniform(0.1, 2.0)),
                  "attention_entropy": rng.uniform(0.5, 2.0, size=3),
                  "attention_spectrum": rng.uniform(0.0, 1.0, size=(3, 6))}
                 for _ in range(num_layers))
  return Diagnosis(model="m", num_images=4, stage=np.asarray(stages),
                   stage_names=("a", "b"), layers=layers)


def test_the_plot_and_the_table_number_layers_alike():
  d = _diagnosis()
  table = d.per_layer()
  frame = d.to_frame()
  fig = plot_diagnoses({"m": d}, ["hc_dc_ratio", "attention_entropy"])
  for ax, metric in zip(fig.axes, ["hc_dc_ratio", "attention_entropy"]):
    line, boundary = ax.get_lines()          # the curve and the stage boundary
    xs, ys = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    # Each plotted point sits at the table's layer number of the same value.
    np.testing.assert_array_equal(xs, table.index.to_numpy())
    np.testing.assert_allclose(ys, table.loc[xs, metric].to_numpy())
    assert set(frame["layer"]) == set(xs.tolist())
    assert xs[0] == 0
    # The stage boundary falls between stage 0's last layer and stage 1's first.
    last_of_0 = table.index[table["stage"] == 0].max()
    assert boundary.get_xdata()[0] == last_of_0 + 0.5
  spectra = plot_spectra(d)
  legend = [t.get_text() for t in spectra.axes[0].get_legend().get_texts()]
  assert legend == [f"layer {i}" for i in table.index]
