"""`restart-in-driver` (the default): the pipeline agent in the Spark driver stops and starts the
query on request, over the job's control channel; the SparkSession and its executors stay up."""

from __future__ import annotations

from autosizer.actuators.restart import RestartActuator
from autosizer.pipeline.control import ControlChannel


class RestartInDriver(RestartActuator):
    name = "restart-in-driver"

    def __init__(self, context, **settings):
        super().__init__(context, **settings)
        self.control = ControlChannel(context.store)

    def stop(self, generation: int) -> bool:
        asked = self.control.request("drain")
        return self.control.wait_for(f"stopped@{generation}", self.drain_timeout, request_id=asked)

    def start(self, generation: int) -> bool:
        asked = self.control.request("start")
        return self.control.wait_for(f"running@{generation}", self.start_timeout, request_id=asked)
