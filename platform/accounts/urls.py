from django.contrib.auth import views as auth_views
from django.urls import path

from accounts import views

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.account, name="account"),
    path("tokens/<int:pk>/revoke/", views.revoke, name="revoke-token"),
    path("models/", views.register_model, name="register-model"),
    path("models/<int:pk>/vouch/", views.vouch, name="vouch"),
]
