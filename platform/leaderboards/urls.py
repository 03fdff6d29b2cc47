from django.urls import path

from leaderboards import views

urlpatterns = [
    path("problems/<slug:slug>/leaderboard/<slug:hardware>/", views.leaderboard, name="leaderboard"),
    path("compare/models/", views.compare_models_view, name="compare-models"),
    path("compare/hardware/", views.compare_hardware_view, name="compare-hardware"),
]
