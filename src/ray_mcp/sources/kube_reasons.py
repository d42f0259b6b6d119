"""Kubernetes' own reason vocabulary, as the kubelet writes it: the words a pod's container status (its waiting
reason) and a pod's events carry. Named once here; shaping (a pod's finding) and the diagnosis (a pod event's
trouble) read them.
"""

from __future__ import annotations

# An image that cannot be pulled: the container waiting reasons of kubelet's image manager
# (pkg/kubelet/images/types.go: ErrImagePull, ImagePullBackOff, InvalidImageName, ErrImageNeverPull,
# ImageInspectError) and the event reason it records when it cannot inspect the image (InspectFailed).
IMAGE_PULL_REASONS = (
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "ImageInspectError",
    "InspectFailed",
)
