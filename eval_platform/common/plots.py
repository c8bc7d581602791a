"""Plots for asset metadata: matplotlib figures as markdown embedding their PNG."""

import base64
import io


def png_markdown(figure, alt: str) -> str:
    """A matplotlib figure as markdown embedding its PNG."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return f"![{alt}](data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()})"


def new_axes(title: str, size: tuple[float, float] = (6, 3.2)):
    """A matplotlib figure and axes (no display needed), titled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=size, dpi=100)
    axes.set_title(title)
    return figure, axes
