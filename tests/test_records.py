"""The sources' records split basic from detail fields exactly as Ray's installed State API schemas do
(ray.util.state.common: ``base_columns()`` and ``columns()``), and the job record is Ray's JobDetails: a Ray
upgrade that adds, drops or moves a column fails here, naming it."""

from __future__ import annotations

import pytest
from ray.dashboard.modules.job.pydantic_models import JobDetails
from ray.util.state import common

from ray_mcp.sources.records import STATE_RECORDS, Job, basic_columns, columns


@pytest.mark.parametrize("resource", sorted(STATE_RECORDS))
def test_each_records_basic_and_detail_fields_are_rays(resource: str) -> None:
    basic, whole, schema_name = STATE_RECORDS[resource]
    schema = getattr(common, schema_name)
    ray_basic = set(schema.base_columns())
    ray_detail = set(schema.columns()) - ray_basic
    assert set(basic_columns(basic)) == ray_basic, (
        f"{resource}: basic fields ours-only {set(basic_columns(basic)) - ray_basic}, "
        f"Ray-only {ray_basic - set(basic_columns(basic))}"
    )
    ours_detail = set(columns(whole)) - set(basic_columns(basic))
    assert ours_detail == ray_detail, (
        f"{resource}: detail fields ours-only {ours_detail - ray_detail}, Ray-only {ray_detail - ours_detail}"
    )


def test_the_job_record_is_rays_job_details() -> None:
    assert set(columns(Job)) == set(JobDetails.model_fields)
