from django import forms
from django.contrib.auth.forms import UserCreationForm


class SignUpForm(UserCreationForm):
    email = forms.EmailField(required=False, help_text="optional; for password resets by an admin")

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, initial="harness", help_text="what uses it, e.g. the CLI on a laptop")
