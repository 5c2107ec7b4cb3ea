"""The templates for `sam local invoke` (context samLocal=true, infra/sam.py) and what they must
not change in the deployed ones. `make sam-check` runs the real SAM CLI on them; these run in
`make test` without it."""

from __future__ import annotations

from typing import Any

import pytest
from infra_support import resources_of, ssm_parameter, synthesize

from infra import sam
from infra.config import powertools_ssm_parameter
from vhs import settings
from vhs.shapes.local import CONTAINER_ENDPOINT
from vhs_ops.local.sam import env_vars


@pytest.fixture(scope="module")
def sam_app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    layer = tmp_path_factory.mktemp("powertools-layer")
    (layer / "python" / "aws_lambda_powertools").mkdir(parents=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sam, "LAYER_DIR", layer)
        yield synthesize(
            tmp_path_factory.mktemp("cdk.out.sam"), context={"samLocal": "true"}, nag=False
        )


def functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return resources_of(template, "AWS::Lambda::Function")


def test_each_function_has_a_name_a_person_can_type_in_both_templates(app, sam_app) -> None:
    for synthesized in (app, sam_app):
        named = {
            function["Metadata"][sam.RESOURCE_ID]
            for stack in (synthesized.stacks.ingest, synthesized.stacks.changes)
            for function in functions(synthesized.template_json(stack)).values()
        } | {
            function["Metadata"][sam.RESOURCE_ID]
            for stack in (
                synthesized.stacks.maintenance,
                synthesized.stacks.read_api,
                synthesized.stacks.reindex,
                synthesized.stacks.bulk_import,
            )
            for function in functions(synthesized.template_json(stack)).values()
        }
        assert named == set(settings.FUNCTIONS)


def test_the_sam_templates_name_every_resource_so_sam_parses_no_construct_path(sam_app) -> None:
    stacks = (sam_app.stacks.store, sam_app.stacks.ingest, sam_app.stacks.maintenance)
    for stack in (*stacks, sam_app.stacks.reindex):
        template = sam_app.template_json(stack)
        unnamed = [
            key
            for key, resource in template["Resources"].items()
            if sam.RESOURCE_ID not in resource.get("Metadata", {})
        ]
        assert unnamed == [], stack.stack_name


def test_the_sam_templates_take_powertools_from_a_local_layer_and_declare_the_endpoint(
    sam_app,
) -> None:
    for stack in (sam_app.stacks.ingest, sam_app.stacks.changes, sam_app.stacks.maintenance):
        template = sam_app.template_json(stack)
        layers = resources_of(template, "AWS::Lambda::LayerVersion")
        assert len(layers) == 1
        (layer_id,) = layers
        # An asset of this synth (SAM reads its folder from the metadata the CDK CLI adds).
        assert layers[layer_id]["Properties"]["Content"]["S3Key"].endswith(".zip")
        for function in functions(template).values():
            assert function["Properties"]["Layers"] == [{"Ref": layer_id}]
            variables = function["Properties"]["Environment"]["Variables"]
            assert variables["AWS_ENDPOINT_URL"] == CONTAINER_ENDPOINT


def test_the_deployed_templates_are_unchanged_by_it(app) -> None:
    parameter = powertools_ssm_parameter()
    for stack in (app.stacks.ingest, app.stacks.changes, app.stacks.maintenance):
        template = app.template_json(stack)
        assert resources_of(template, "AWS::Lambda::LayerVersion") == {}
        for function in functions(template).values():
            assert function["Properties"]["Layers"] == [{"Ref": ssm_parameter(template, parameter)}]
            assert "AWS_ENDPOINT_URL" not in function["Properties"]["Environment"]["Variables"]
            # The role's GetAtt orders it already (W3005); the policy's DependsOn stays.
            role = function["Properties"]["Role"]["Fn::GetAtt"][0]
            assert role not in function["DependsOn"]
            assert [
                resources_of(template, "AWS::IAM::Policy")[d]["Type"] for d in function["DependsOn"]
            ]


def test_the_env_vars_file_gives_the_local_stacks_values_and_unsets_the_deployed_ones() -> None:
    exported = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        settings.TABLE_NAME: "vhs-local",
        settings.BUCKET_NAME: "vhs-local-bodies",
        settings.DLQ_URL: "http://127.0.0.1:5000/123456789012/vhs-local-ingest-dlq",
    }
    document = env_vars(exported, 5000)
    assert set(document) == {"Parameters"}
    values = document["Parameters"]
    assert values["AWS_ENDPOINT_URL"] == "http://host.docker.internal:5000"
    # SAM sets credentials and the region itself; a template never declares them.
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"} & set(values)
    assert values[settings.DLQ_URL] == exported[settings.DLQ_URL]
    # The deployed body prefix ("bodies") must not reach a function run against the local
    # stack, whose prefix is unset: every store setting is given, unset ones empty.
    assert values[settings.PREFIX] == ""
    assert set(settings.STORE_VARIABLES) <= set(values)
    assert settings.StoreSettings.from_env(values).prefix == ""
