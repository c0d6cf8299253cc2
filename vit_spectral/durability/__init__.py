"""What makes a run durable: a killed run resumes and loses nothing, a
damaged checkpoint or a second run on a workdir is one clear line.

  checkpointing      orbax CheckpointManager wrapper (unreadable steps moved aside), `latest_params`
  state_fingerprint  per-array fingerprints saved with a checkpoint, checked on restore
  workdir_lock       one run per workdir: a lock naming its holder's host and PID
  resume             resume checks against config.json and the checkpoints; config history
  stream_state       the input stream's position saved with each checkpoint; rollbacks
  preemption         SIGTERM/SIGINT: stop at a step all processes agree on (exit 75)

The trainer (`vit_spectral.training.trainer`) uses them; they import nothing of
it. Submodules are imported on use (`from vit_spectral.durability import resume`).
"""

__all__ = ["checkpointing", "preemption", "resume", "state_fingerprint", "stream_state",
           "workdir_lock"]
