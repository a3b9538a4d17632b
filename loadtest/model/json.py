from typing import Any

JsonObject = dict[str, Any]
"""Free-form JSON from outside (payloads, schemas, server answers): not our own structures."""
