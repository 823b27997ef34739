from django.core.exceptions import ValidationError
from rest_framework.test import APIRequestFactory

from infrastructure.errors import exception_handler


def test_a_model_validation_error_is_a_400_naming_the_field():
    request = APIRequestFactory().get("/")
    error = ValidationError({"senior": "This senior would create a cycle in the reporting line."})
    response = exception_handler(error, {"request": request})
    assert response.status_code == 400
    assert response.data == {
        "success": False,
        "error": "senior: This senior would create a cycle in the reporting line.",
        "code": "invalid",
    }


def test_a_plain_validation_error_is_a_400():
    response = exception_handler(
        ValidationError("Bad input."), {"request": APIRequestFactory().get("/")}
    )
    assert response.status_code == 400
    assert response.data["error"] == "Bad input."


def test_an_error_in_a_list_of_objects_names_the_item_by_its_index():
    from rest_framework import serializers

    class Item(serializers.Serializer):
        name = serializers.CharField()

    class Body(serializers.Serializer):
        items = Item(many=True)

    body = Body(data={"items": [{"name": "first"}, {"name": ""}]})
    assert not body.is_valid()
    response = exception_handler(
        serializers.ValidationError(body.errors), {"request": APIRequestFactory().post("/")}
    )
    assert response.status_code == 400
    assert response.data["error"] == "items.1.name: This field may not be blank."
