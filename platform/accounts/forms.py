from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

from accounts.names import username_problem


class SignUpForm(UserCreationForm):
    email = forms.EmailField(required=False, help_text="optional; for password resets by an admin")

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")

    def clean_username(self):
        username = super().clean_username()  # None when it already refused the name
        if not username:
            return username
        taken = get_user_model().objects.values_list("username", flat=True)
        problem = username_problem(username, taken)
        if problem:
            raise forms.ValidationError(problem, code="confusable")
        return username


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, initial="harness", help_text="what uses it, e.g. the CLI on a laptop")


class ModelNameForm(forms.Form):
    name = forms.CharField(max_length=100, help_text='the model tag your runs carry, e.g. "gpt-5.5"')
