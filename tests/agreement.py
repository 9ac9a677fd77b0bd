"""Lines the differential tests report ("N policies, M inputs: regorus and OPA
agree"), printed by conftest at the end of the run so the counts are seen."""

AGREEMENT: list[str] = []
