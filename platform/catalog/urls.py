from django.urls import path

from catalog import views

urlpatterns = [
    path("", views.catalog, name="catalog"),
    path("problems/<slug:slug>/", views.problem, name="problem"),
    path("problems/<slug:slug>/prompt/", views.prompt, name="prompt"),
]
