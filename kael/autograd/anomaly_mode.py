"""torch.autograd.anomaly_mode's path: kael.autograd's anomaly detection switches."""
from kael.autograd import detect_anomaly, set_detect_anomaly  # noqa: F401

__all__ = ["detect_anomaly", "set_detect_anomaly"]
