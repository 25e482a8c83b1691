"""The Foxglove layout of a Horde's questions, for the live view (``live_view`` node): a tab per question.

    python -m gamma_net_ros.foxglove_layout config/horde.yaml > config/live_view.json

Each tab plots, from the live view's channels, the question's predictions as (1 - gamma) V at
each published tau over time (the signal's average over about the next tau steps: one axis for
every timescale); at the middle published tau, the prediction made H ticks before beside the
return that then came, both times (1 - gamma), as each return completes; the latest predictions
against tau; and the running error at each tau as a ratio to the mean predictor's (below 1: the
question learned something about the state). ``config/live_view.json`` is this layout for
``config/horde.yaml``; write your own questions' with the command above.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

import foxglove.layouts as fl

from gamma_net_core.horde.questions import HordeSpec, load_questions
from gamma_net_core.horde.readouts import horizon


def message_path(topic: str, field: str) -> str:
    """Foxglove's message path of ``field`` on ``topic`` (quoted if it has characters beyond ``[A-Za-z0-9_/]``)."""
    return f"{topic if re.fullmatch(r'[A-Za-z0-9_/]+', topic) else json.dumps(topic)}.{field}"


def horde_layout(
    spec: HordeSpec,
    *,
    predictions: str = "/horde/predictions",
    errors: str = "/horde/errors",
    returns: str = "/horde/returns",
) -> fl.Layout:
    """The layout of ``spec``'s questions, reading the live view's channels under these three topics."""
    taus = spec.publish_taus
    k = len(taus) // 2  # one timescale's returns: the middle one, neither a tick's noise nor minutes of delay
    H = horizon(1.0 - 1.0 / taus[k])

    def over_time(topic: str, field: str, title: str, y: str) -> fl.PlotPanel:
        series = [
            fl.PlotSeries(value=message_path(topic, f"{field}[{k}]"), label=f"tau {tau:g}")
            for k, tau in enumerate(taus)
        ]
        return fl.PlotPanel(title=title, config=fl.PlotConfig(paths=series, y_axis_label=y, show_legend=True))

    tabs = []
    for question in spec.questions:
        name = question.name
        p, e, r = f"{predictions}/{name}", f"{errors}/{name}", f"{returns}/{name}"
        ago = f"{H} ticks ago" if question.termination is None else f"up to {H} ticks ago (fewer at its termination)"
        realized = fl.PlotPanel(
            title=f"{name}: at tau {taus[k]:g}, the prediction made {ago} vs the return that came",
            config=fl.PlotConfig(
                paths=[
                    fl.PlotSeries(value=message_path(r, f"scaled_predictions[{k}]"), label="(1 - gamma) V, predicted"),
                    fl.PlotSeries(value=message_path(r, f"scaled_returns[{k}]"), label="(1 - gamma) G, realized"),
                ],
                y_axis_label="(1 - gamma) V and G",
                show_legend=True,
            ),
        )
        now = fl.PlotPanel(
            title=f"{name}: the latest predictions over tau",
            config=fl.PlotConfig(
                x_axis_val="currentCustom",
                x_axis_path=fl.PlotXAxisPath(value=message_path(p, "taus[:]")),
                paths=[fl.PlotSeries(value=message_path(p, "scaled[:]"), label="(1 - gamma) V")],
                x_axis_label="tau (steps)",
                y_axis_label="(1 - gamma) V",
            ),
        )
        content = fl.SplitContainer(
            direction="column",
            items=[
                fl.SplitItem(
                    proportion=2,
                    content=over_time(p, "scaled", f"{name}: (1 - gamma) V at each tau", "(1 - gamma) V"),
                ),
                fl.SplitItem(content=realized),
                fl.SplitItem(
                    content=fl.SplitContainer(
                        direction="row",
                        items=[
                            fl.SplitItem(content=now),
                            fl.SplitItem(
                                content=over_time(
                                    e, "ratio", f"{name}: running RMSE / mean predictor's", "RMSE ratio (< 1: learned)"
                                )
                            ),
                        ],
                    )
                ),
            ],
        )
        tabs.append(fl.TabItem(title=name, content=content))
    return fl.Layout(content=fl.TabContainer(tabs=tabs))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m gamma_net_ros.foxglove_layout QUESTIONS_YAML > layout.json", file=sys.stderr)
        return 2
    print(horde_layout(load_questions(pathlib.Path(args[0]))).to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
