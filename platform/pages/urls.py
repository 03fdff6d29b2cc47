from django.urls import path

from pages import catalog, leaderboards, submissions

urlpatterns = [
    path("", catalog.catalog, name="catalog"),
    path("problems/<slug:slug>/", catalog.problem, name="problem"),
    path("problems/<slug:slug>/prompt/", catalog.prompt, name="prompt"),
    path("problems/<slug:slug>/leaderboard/<slug:hardware>/", leaderboards.leaderboard, name="leaderboard"),
    path("compare/models/", leaderboards.compare_models_view, name="compare-models"),
    path("compare/hardware/", leaderboards.compare_hardware_view, name="compare-hardware"),
    path("submit/", submissions.submit, name="submit"),
    path("submissions/", submissions.mine, name="my-submissions"),
    path("submissions/<int:pk>/", submissions.submission, name="submission"),
    path("submissions/<int:pk>/status/", submissions.status, name="submission-status"),
]
