from django.urls import path

from submissions import views

urlpatterns = [
    path("submit/", views.submit, name="submit"),
    path("submissions/", views.mine, name="my-submissions"),
    path("submissions/<int:pk>/", views.submission, name="submission"),
    path("submissions/<int:pk>/status/", views.status, name="submission-status"),
]
