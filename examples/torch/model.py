"""A small convolutional classifier for the example's 10 classes."""
from torch import nn


class SmallConvNet(nn.Module):
    """conv(3->w) -> pool -> conv(w->2w) -> pool -> `extra` x conv(2w->2w)
    -> global average pool -> linear(2w->64) -> linear(64->classes).
    `width` and `extra` make it as heavy as a scenario needs."""

    def __init__(self, width=16, extra=0, classes=10):
        super().__init__()
        layers = [nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                  nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        for _ in range(extra):
            layers += [nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(2 * width, 64), nn.ReLU(), nn.Linear(64, classes))

    def forward(self, x):
        return self.head(self.features(x))


def train_step(model, optimizer, images, labels):
    """One SGD step; returns the loss."""
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return float(loss)
